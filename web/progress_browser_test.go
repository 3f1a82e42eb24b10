package web_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/web"
)

// gatedORT is ONNX Runtime with gates in front of its builds: the first
// build waits at first, every later one at later. A build starts (and the
// worker reports its phase) as usual, waits until its gate opens, then
// builds for real: the test holds a graph in a phase while it looks.
type gatedORT struct {
	backend.Backend
	mu           sync.Mutex
	builds       int
	first, later chan struct{}
	openF, openL sync.Once
	reachedFirst chan string
	reachedLater chan string
}

func newGatedORT() *gatedORT {
	return &gatedORT{Backend: ort.New(ort.Options{}), first: make(chan struct{}), later: make(chan struct{}),
		reachedFirst: make(chan string, 1), reachedLater: make(chan string, 16)}
}

func (g *gatedORT) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	g.mu.Lock()
	g.builds++
	gate := g.later
	if g.builds == 1 {
		gate = g.first
		g.reachedFirst <- req.Candidate.String()
	} else {
		g.reachedLater <- req.Candidate.String()
	}
	g.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Backend.Build(ctx, req)
}

func (g *gatedORT) openFirst() { g.openF.Do(func() { close(g.first) }) }
func (g *gatedORT) openLater() { g.openL.Do(func() { close(g.later) }) }

// The run page shows, live, where each pending graph stands: the worker
// on it, its phase, the candidate and the time in the phase and in the
// attempt, and a task the worker took ahead of its one slot as waiting,
// prefetched by it. The page reloads itself (its meta refresh, as before:
// no script) and shows the graph's next candidate without the test
// navigating. Headless Chromium, a real Redis, a real 1-slot worker with
// prefetch and real ONNX Runtime; the builds wait at gates.
func TestRunPageShowsProgressInABrowser(t *testing.T) {
	bctx := browser(t)
	url := testsvc.Redis(t)
	rdb, err := runstate.ConnectRedis(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{rdb: rdb, root: t.TempDir()}
	if f.store, err = artifacts.NewLocal(f.root); err != nil {
		t.Fatal(err)
	}
	f.client = jobs.NewClient(rdb, f.store)
	t.Cleanup(func() { f.client.Close() })
	gate := newGatedORT()
	t.Cleanup(func() { gate.openFirst(); gate.openLater() })
	const worker = "web-progress-w1"
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: f.store, Backends: backend.Registry{"ort": gate}, Queues: []string{"cpu"},
		Concurrency: 1, Prefetch: 1, WorkDir: t.TempDir(), Name: worker})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	run := f.submit(t, twoGraphBundle(t), "cpu", "ort:cpu:basic,ort:cpu:all")
	select {
	case <-gate.reachedFirst:
	case <-time.After(3 * time.Minute):
		t.Fatal("no build started")
	}
	// The other graph waits for the one slot: prefetched.
	var st runstate.RunStatus
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if st, err = f.client.Runs().Get(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range st.Graphs {
			if g.State == runstate.StatePrefetched {
				n++
			}
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one graph prefetched: %+v", st.Graphs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv := f.serve(t, web.Config{})
	tb := open(t, bctx, srv.URL+"/runs/"+run)
	tb.clean(t, "run page")
	type row struct{ Graph, State, Worker, Phase, Candidate, InPhase, InAttempt string }
	rows := func(tb *tab) ([]row, error) {
		return chromedp.Run(tb.ctx, chromedp.Evaluate[[]row](`[...document.querySelectorAll("#progress tr.graph-progress")].map(r => ({
			Graph: r.dataset.graph, State: r.querySelector(".state").textContent, Worker: r.querySelector(".worker").textContent,
			Phase: r.querySelector(".phase").textContent, Candidate: r.querySelector(".candidate").textContent,
			InPhase: r.querySelector(".in-phase").textContent, InAttempt: r.querySelector(".in-attempt").textContent}))`))
	}
	got, err := rows(tb)
	if err != nil {
		t.Fatal(err)
	}
	byState := map[string]row{}
	for _, r := range got {
		byState[r.State] = r
	}
	running, waiting := byState[runstate.StateRunning], byState["waiting (prefetched by worker "+worker+")"]
	if len(got) != 2 || running.Worker != worker || running.Phase != runstate.PhaseBuild || running.Candidate != "ort:cpu:basic (1/2)" ||
		running.InPhase == "—" || running.InAttempt == "—" || waiting.Worker != worker || waiting.Phase != runstate.PhaseWaiting || waiting.InAttempt == "—" {
		t.Fatalf("the run page's progress: %+v: want one graph building ort:cpu:basic (1/2) on %s, with its times, and one waiting, prefetched by it", got, worker)
	}
	tb.screenshot(t, "web-run-progress")
	// Let the first build go: its graph builds the second candidate, held
	// at the later gate. The page, left alone, reloads and shows it.
	gate.openFirst()
	select {
	case <-gate.reachedLater:
	case <-time.After(3 * time.Minute):
		t.Fatal("the second candidate's build did not start")
	}
	deadline = time.Now().Add(time.Minute) // the page reloads every 10 s
	for {
		got, err := rows(tb) // an error: the page is reloading
		if err == nil && len(got) == 2 && got[0].Candidate+got[1].Candidate != "" {
			moved := false
			for _, r := range got {
				if r.Graph == running.Graph && r.Phase == runstate.PhaseBuild && r.Candidate == "ort:cpu:all (2/2)" {
					moved = true
				}
			}
			if moved {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not update itself to the graph's second candidate: %+v (%v)", got, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The run ends: no progress is left on its page.
	gate.openLater()
	f.wait(t, run, runstate.RunDone)
	done := open(t, bctx, srv.URL+"/runs/"+run)
	done.clean(t, "the finished run's page")
	if n := done.count(t, "#progress"); n != 0 || strings.Contains(done.text(t), "In progress") {
		t.Errorf("a finished run's page still shows progress")
	}
}
