package cli_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/metrics"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
)

// gatedORT is ONNX Runtime with a gate in front of every build: a build
// starts (and its phase is reported) as usual, then waits until the test
// opens the gate, then builds for real. It holds graphs in the build
// phase for as long as the test looks at them; everything else is the
// worker's own code and real ONNX Runtime.
type gatedORT struct {
	backend.Backend
	entered chan string   // the candidate of each build that reached the gate
	open    chan struct{} // closed: every build goes on
}

func (g gatedORT) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	g.entered <- req.Candidate.String()
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Backend.Build(ctx, req)
}

// While a run's graphs are tuned, `producer status RUN` shows, per graph,
// the worker on it, the phase, the candidate and the time in both the
// phase and the attempt (-o json and the table); a task a worker took
// ahead of its one slot (prefetch) shows as waiting, prefetched by that
// worker, never as running or asynq's "active"; and the STATUS column
// shows one state, not "pending" beside an "active" task. Real Redis,
// two real 1-slot workers with prefetch, real ONNX Runtime; the builds
// wait at a gate so that the test sees them in the build phase.
func TestStatusShowsProgressWhileAGraphRuns(t *testing.T) {
	orttest.Need(t)
	url := testsvc.Redis(t)
	rdb, err := runstate.ConnectRedis(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	dir := t.TempDir()
	store, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + dir
	gate := gatedORT{Backend: ort.New(ort.Options{}), entered: make(chan string, 8), open: make(chan struct{})}
	var once sync.Once
	openGate := func() { once.Do(func() { close(gate.open) }) }
	t.Cleanup(openGate)
	workers := []string{"progress-w1", "progress-w2"}
	// Each worker's metrics, as its /metrics serves them.
	series := map[string]*metrics.Worker{}
	scrape := func(name string) string {
		rec := httptest.NewRecorder()
		series[name].Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	for _, name := range workers {
		series[name] = metrics.NewWorker([]string{"cpu"})
		w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: backend.Registry{"ort": gate}, Queues: []string{"cpu"},
			Concurrency: 1, Prefetch: 1, WorkDir: t.TempDir(), Name: name, Observer: series[name]})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Shutdown)
	}
	b := orttest.Bundle(t, "progress.Three",
		orttest.Part{Model: onnxtest.MLP(16, 32, 4), Shapes: []string{"input:1x16..4x16"}},
		orttest.Part{Model: onnxtest.MLP(16, 24, 4), Shapes: []string{"input:1x16..4x16"}},
		orttest.Part{Model: onnxtest.MLP(8, 16, 4), Shapes: []string{"input:1x8..4x8"}})
	run := submitRun(t, b, "--redis", url, "--store", storeURL, "--target", "cpu", "--strategy", "max-throughput",
		"--candidates", "ort:cpu:basic,ort:cpu:all", "--bench-time", benchTime)

	status := func() runstate.RunStatus {
		o := producer(t, "status", run, "--redis", url, "--store", storeURL, "-o", "json")
		o.wantCode(t, cli.ExitOK)
		var st runstate.RunStatus
		if err := json.Unmarshal([]byte(o.stdout), &st); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, o)
		}
		return st
	}
	// Two slots in the fleet: two builds reach the gate; the third task
	// is taken by a worker ahead of its slot and waits for it.
	for range 2 {
		select {
		case <-gate.entered:
		case <-time.After(3 * time.Minute):
			t.Fatalf("two builds did not start: %+v", status())
		}
	}
	var st runstate.RunStatus
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st = status()
		n := map[string]int{}
		for _, g := range st.Graphs {
			n[g.State]++
		}
		if n[runstate.StateRunning] == 2 && n[runstate.StatePrefetched] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want two graphs running and one prefetched: %+v", st.Graphs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // elapsed time must move
	st = status()
	onWorker := map[string]bool{}
	var prefetched string
	for name, g := range st.Graphs {
		p := g.Progress
		if g.Status != runstate.GraphPending || p == nil || g.Task == nil || g.Task.State != "active" || p.Attempt != 1 {
			t.Fatalf("graph %s: %+v, progress %+v, task %+v: want pending, with its attempt's progress, and its task active in asynq", name, g, p, g.Task)
		}
		switch g.State {
		case runstate.StateRunning:
			// Held at the gate: the build of the first candidate.
			if p.Phase != runstate.PhaseBuild || p.Candidate != "ort:cpu:basic" || p.Index != 1 || p.Count != 2 || p.Prefetched {
				t.Errorf("graph %s runs with progress %+v: want build of ort:cpu:basic (1/2)", name, p)
			}
			onWorker[p.Worker] = true
		case runstate.StatePrefetched:
			prefetched = name
			if p.Phase != runstate.PhaseWaiting {
				t.Errorf("graph %s is prefetched with progress %+v: want it waiting for a slot", name, p)
			}
		}
		if !strings.HasPrefix(p.Worker, "progress-w") || time.Since(p.PhaseSince) < 50*time.Millisecond || p.AttemptSince.After(p.PhaseSince) {
			t.Errorf("graph %s: progress %+v: want its worker, and its phase and attempt started in the past, the attempt first", name, p)
		}
	}
	if len(onWorker) != 2 {
		t.Errorf("the running graphs are on workers %v, want one on each 1-slot worker", onWorker)
	}
	// The metrics count the same: a build on each worker, one task
	// waiting on the worker that prefetched it.
	for _, name := range workers {
		m := scrape(name)
		waiting := "0"
		if name == st.Graphs[prefetched].Progress.Worker {
			waiting = "1"
		}
		for _, want := range []string{`tunefleet_tasks_in_phase{phase="build",queue="cpu"} 1`, `tunefleet_tasks_in_phase{phase="waiting",queue="cpu"} ` + waiting} {
			if !strings.Contains(m, want+"\n") {
				t.Errorf("worker %s's /metrics lacks %s", name, want)
			}
		}
	}
	// The table: one STATUS per graph, no asynq "active" beside it.
	text := producer(t, "status", run, "--redis", url, "--store", storeURL)
	text.wantCode(t, cli.ExitOK)
	t.Logf("status while two graphs build and one waits:\n%s", text.stdout)
	wantLine := "waiting (prefetched by worker " + st.Graphs[prefetched].Progress.Worker + ")"
	if strings.Count(text.stdout, "  running  ") != 2 || strings.Count(text.stdout, wantLine) != 1 || strings.Count(text.stdout, "build ort:cpu:basic (1/2) on worker progress-w") != 2 ||
		strings.Contains(text.stdout, "pending") || strings.Contains(text.stdout, "active") || !strings.Contains(text.stdout, " in attempt 1") {
		t.Errorf("status table: want two graphs running (build ort:cpu:basic (1/2) on a worker, the time in it and in the attempt) and one %q, no pending or active:\n%s", wantLine, text.stdout)
	}
	// Open the gate: the run ends, and no progress is left behind.
	openGate()
	w := producer(t, "status", run, "--redis", url, "--store", storeURL, "--watch", "--timeout", "4m", "-o", "json")
	w.wantCode(t, cli.ExitOK)
	if err := json.Unmarshal([]byte(w.stdout), &st); err != nil {
		t.Fatal(err)
	}
	for name, g := range st.Graphs {
		if g.State != runstate.GraphDone || g.Progress != nil {
			t.Errorf("graph %s after the run: state %q, progress %+v: want done, none", name, g.State, g.Progress)
		}
	}
	// A task's last report ends just after its graph completes: the
	// gauges come back to zero as the handlers return.
	idle := func() string {
		for _, name := range workers {
			for _, phase := range runstate.ProgressPhases() {
				if want := `tunefleet_tasks_in_phase{phase="` + phase + `",queue="cpu"} 0`; !strings.Contains(scrape(name), want+"\n") {
					return name + " lacks " + want
				}
			}
		}
		return ""
	}
	for deadline := time.Now().Add(time.Minute); idle() != ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the run, worker %s", idle())
		}
	}
	if n, err := rdb.Exists(context.Background(), "tunefleet:run:{"+run+"}:progress").Result(); err != nil || n != 0 {
		t.Errorf("the run's progress record is still in Redis (%d, %v): every attempt clears its own", n, err)
	}
}
