package jobs_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// testRetryUnit is the RetryUnit of the tests' workers: a retry or a
// hand-back waits tens of milliseconds instead of seconds (same logic, see
// WorkerConfig.RetryUnit).
const testRetryUnit = 20 * time.Millisecond

// threeGraphBundle makes a bundle of three graph specs (an MLP, a conv net
// and a two-input graph) with reference outputs from ONNX Runtime.
func threeGraphBundle(t *testing.T) string {
	t.Helper()
	return orttest.Bundle(t, "tests.ThreeGraphs",
		orttest.Part{Model: onnxtest.MLP(16, 32, 4), Shapes: []string{"input:1x16..8x16"}},
		orttest.Part{Model: onnxtest.ConvNet(), Shapes: []string{"image:1x3x16x16..4x3x16x16"}},
		orttest.Part{Model: onnxtest.TwoInputs(), Shapes: []string{"a:1x8..4x8", "mask:1x8..4x8"}})
}

// perturb breaks graph 0's first reference output of its first sample.
func perturb(t *testing.T, dir string) {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := b.Manifest.Graphs[0]
	p := filepath.Join(dir, filepath.FromSlash(g.Samples[0]), "output_0.pb")
	ref, err := bundle.ReadTensorFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(ref.Data))
	binary.LittleEndian.PutUint32(ref.Data, math.Float32bits(v+1))
	data, _ := bundle.EncodeTensorProto(ref)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

type env struct {
	e      *jobs.Embedded
	store  artifacts.Store
	client *jobs.Client
}

func startEmbedded(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	store, err := artifacts.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	// Runs last (cleanups are LIFO), once the workers have stopped.
	t.Cleanup(func() { validateStoredDocs(t, root) })
	e, err := jobs.StartEmbedded(jobs.WorkerConfig{
		Store: store, Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Queues: []string{"cpu"}, Concurrency: 2,
		WorkDir: t.TempDir(), RetryUnit: testRetryUnit,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(e.Redis, store)
	t.Cleanup(func() { c.Close(); e.Close() })
	return &env{e: e, store: store, client: c}
}

// startWorker starts another worker on the embedded Redis and store, with
// cfg's other settings (an ORT backend unless it names backends); it is
// shut down when the test ends.
func (env *env) startWorker(t *testing.T, cfg jobs.WorkerConfig) *jobs.Worker {
	t.Helper()
	cfg.Redis, cfg.Store, cfg.WorkDir, cfg.RetryUnit = env.e.Redis, env.store, t.TempDir(), testRetryUnit
	if cfg.Backends == nil {
		cfg.Backends = backend.Registry{"ort": ort.New(ort.Options{})}
	}
	w, err := jobs.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	return w
}

func submitOptions(t *testing.T, strat, cands string) jobs.SubmitOptions {
	t.Helper()
	s, err := strategy.Parse(strat, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := backend.ParseCandidates(cands)
	if err != nil {
		t.Fatal(err)
	}
	return jobs.SubmitOptions{Target: "cpu", Strategy: s, Candidates: cs, Backends: backend.Registry{"ort": ort.New(ort.Options{})},
		BenchTime: 20 * time.Millisecond}
}

func open(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wait(t *testing.T, runs *runstate.Runs, run string) runstate.RunStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		st, err := runs.Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s did not finish: %+v", run, st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestEmbeddedRunFinalizesOnceAndFetches(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended"))
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Created || sub.Graphs != 3 || sub.Enqueued != 3 {
		t.Fatalf("submission %+v", sub)
	}
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone || st.Done != 3 || st.Failed != 0 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
	got, err := artifacts.Fetch(ctx, env.store, "tests.ThreeGraphs", "cpu", "", filepath.Join(t.TempDir(), "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Run != sub.Run || len(got.Engines) != 3 {
		t.Fatalf("fetched %+v", got)
	}
	// Finalize wrote the run's report: a throughput-vs-batch chart per
	// graph, one series per candidate.
	page, err := artifacts.ReadObject(ctx, env.store, artifacts.RunReportKey(sub.Run), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `data-kind="lines" data-series="2"`); n != 3 {
		t.Errorf("report.html has %d two-series charts, want 3 (one per graph)", n)
	}
	// Fetch replaces nothing but a missing path or an empty directory: a
	// file or a link named as the destination is refused and left as it was.
	scratch := t.TempDir()
	file, link, empty := filepath.Join(scratch, "notes.txt"), filepath.Join(scratch, "link"), filepath.Join(scratch, "empty")
	os.WriteFile(file, []byte("keep me"), 0o644)
	os.Mkdir(empty, 0o755)
	os.Symlink(empty, link)
	for _, dest := range []string{file, link} {
		if _, err := artifacts.Fetch(ctx, env.store, "tests.ThreeGraphs", "cpu", "", dest); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("fetch into %s: %v, want a refusal", dest, err)
		}
	}
	if data, _ := os.ReadFile(file); string(data) != "keep me" {
		t.Errorf("fetch changed %s: %q", file, data)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("fetch replaced the link %s", link)
	}
	if _, err := artifacts.Fetch(ctx, env.store, "tests.ThreeGraphs", "cpu", "", empty); err != nil {
		t.Errorf("fetch into an empty directory: %v", err)
	}
	state, _, err := artifacts.ReadState(ctx, env.store, "tests.ThreeGraphs", "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range state.Graphs {
		sum, size, err := bundle.SHA256File(got.Engines[g.Name])
		if err != nil || sum != g.Engine.SHA256 || size != g.Engine.Size {
			t.Fatalf("graph %s: fetched engine %s %d, state says %+v (%v)", g.Name, sum, size, g.Engine, err)
		}
	}
	// The stored results name the winner's engine and every candidate's
	// log, and each of those is a blob in the store; the losing engine is
	// left out of both.
	for _, g := range []string{"0", "1", "2"} {
		var res tuner.Result
		if err := artifacts.GetJSON(ctx, env.store, artifacts.GraphResultKey(sub.Run, g), &res); err != nil {
			t.Fatal(err)
		}
		for i, cr := range res.Results {
			roles := map[string]int{}
			for _, a := range cr.Artifacts {
				roles[a.Role]++
				if _, err := env.store.Stat(ctx, artifacts.BlobKey(a.SHA256)); err != nil {
					t.Errorf("graph %s %s: %s %s is not in the store: %v", g, cr.Candidate, a.Role, a.Path, err)
				}
			}
			wantEngines := 0
			if i == res.Winner.Index {
				wantEngines = 1
			}
			if roles["engine"] != wantEngines || roles["log"] != 1 {
				t.Errorf("graph %s %s (winner %s): artifacts %v", g, cr.Candidate, res.Winner.Candidate, roles)
			}
		}
	}
	// The same run again: nothing is enqueued, nothing changes.
	again, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != sub.Run || again.Created || again.Enqueued != 0 || again.Status != runstate.RunDone {
		t.Fatalf("resubmission %+v", again)
	}
	// --force: a new run, whose graphs all reuse the indexed results.
	o := submitOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended")
	o.Force = true
	forced, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	if forced.Run == sub.Run || !forced.Created || forced.Enqueued != 3 {
		t.Fatalf("forced submission %+v, want a new run", forced)
	}
	fst := wait(t, env.client.Runs(), forced.Run)
	if fst.Status != runstate.RunDone || fst.Finalizations != 1 || fst.Platform != st.Platform {
		t.Fatalf("forced run %+v", fst)
	}
	// The worker found every graph's work key indexed for its platform and
	// rebuilt nothing.
	for g, gs := range fst.Graphs {
		if !strings.HasPrefix(gs.Reason, "reused: ") {
			t.Errorf("graph %s: %+v, want it reused", g, gs)
		}
	}
	// Each run has its history entry; the second's graphs were all
	// reused (it spent nothing and saved what the first spent) and, the
	// same results, it moved nothing beyond noise.
	first := checkHistory(t, env.store, "tests.ThreeGraphs", st)
	second := checkHistory(t, env.store, "tests.ThreeGraphs", fst)
	if first.SpentSeconds <= 0 || first.SavedSeconds != 0 || second.SpentSeconds != 0 || second.SavedSeconds <= 0 {
		t.Errorf("seconds: first spent %g saved %g, second spent %g saved %g", first.SpentSeconds, first.SavedSeconds, second.SpentSeconds, second.SavedSeconds)
	}
	for _, g := range second.Graphs {
		if !g.Reused || g.Bench == nil || g.Bench.CV <= 0 || g.ReusedFrom != sub.Run {
			t.Errorf("second run graph %+v, want reused with its measurement, from run %s", g, sub.Run)
		}
	}
	if cur, prev, err := history.Find(ctx, env.store, "tests.ThreeGraphs", st.Platform, fst.Run); err != nil || prev == nil || prev.Run != sub.Run {
		t.Fatalf("history of the second run: %v, previous %+v", err, prev)
	} else if ch := history.Compare(prev, cur); history.Regressions(ch) != 0 || len(ch) != 0 {
		t.Errorf("the same results compared: %+v, want no change", ch)
	}
}

func TestDeterministicFailureIsRecordedAndNotRetried(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	perturb(t, dir)
	env := startEmbedded(t)
	ctx := context.Background()
	sub, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunFailed || st.Failed != 1 || st.Done != 2 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
	g0 := st.Graphs["0"]
	if g0.Status != runstate.GraphFailed || g0.Class != string(backend.FailWrongAnswer) || g0.Attempts != 1 {
		t.Fatalf("graph 0 %+v, want failed once with wrong_answer", g0)
	}
	insp := asynq.NewInspectorFromRedisClient(env.e.Redis)
	info, err := insp.GetTaskInfo("cpu", jobs.GraphTaskID(sub.Run, "0"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStateArchived || info.Retried != 0 {
		t.Fatalf("task state %v retried %d, want archived without a retry", info.State, info.Retried)
	}
	if _, _, err := artifacts.ReadState(ctx, env.store, "tests.ThreeGraphs", "cpu", ""); err == nil {
		t.Fatal("latest.json moved for a failed run")
	}
	state, _, err := artifacts.ReadState(ctx, env.store, "tests.ThreeGraphs", "cpu", sub.Run)
	if err != nil {
		t.Fatal(err)
	}
	if state.Status != runstate.RunFailed || len(state.Reasons) != 1 {
		t.Fatalf("state %s reasons %v", state.Status, state.Reasons)
	}
	// A failed run has its history entry too, naming the failing graph.
	if e := checkHistory(t, env.store, "tests.ThreeGraphs", st); e.Graphs[0].Status != history.GraphFailed || e.Graphs[0].Failure == nil || e.Graphs[1].Status != history.GraphDone {
		t.Errorf("failed run's history graphs %+v", e.Graphs)
	}
	// Submitting it again says it failed, and enqueues nothing: the archived
	// task's ID is not reused and the run stays as it was.
	again, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != sub.Run || again.Created || again.Enqueued != 0 || again.Status != runstate.RunFailed {
		t.Fatalf("resubmission %+v, want the failed run reported", again)
	}
}

func TestWorkForAnotherPlatformIsHandedBackNotLost(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t) // its worker serves "cpu"; this test uses queue "plat"
	ctx := context.Background()
	store := env.store
	fpX := gpu.Fingerprint{Kind: gpu.KindCPU, CPU: gpu.CPU{Model: "Test CPU X"}, ORTVersion: "1.24.1"}
	fpY := gpu.Fingerprint{Kind: gpu.KindCPU, CPU: gpu.CPU{Model: "Test CPU Y"}, ORTVersion: "1.24.1"}
	if fpX.PlatformKey() == fpY.PlatformKey() {
		t.Fatal("the two fake machines share a platform key")
	}
	newWorker := func(fp gpu.Fingerprint) *jobs.Worker {
		return env.startWorker(t, jobs.WorkerConfig{Queues: []string{"plat"}, Concurrency: 1, Fingerprint: fp})
	}
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = "plat"
	sub, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	// Another worker, of platform X, has started this run.
	if _, err := env.client.Runs().BindPlatform(ctx, sub.Run, fpX.PlatformKey()); err != nil {
		t.Fatal(err)
	}
	y := newWorker(fpY)
	insp := asynq.NewInspectorFromRedisClient(env.e.Redis)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := insp.GetTaskInfo("plat", jobs.GraphTaskID(sub.Run, "0"))
		if err != nil {
			t.Fatal(err)
		}
		if info.State == asynq.TaskStateRetry {
			if info.Retried != 0 {
				t.Fatalf("refusing used up a retry: %+v", info)
			}
			if !strings.Contains(info.LastErr, "platform") {
				t.Fatalf("last error %q does not say why", info.LastErr)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker Y never refused the task: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := env.client.Runs().Get(ctx, sub.Run); st.Done+st.Failed != 0 {
		t.Fatalf("worker Y tuned a graph of a run bound to another platform: %+v", st)
	}
	// A worker of the run's platform finishes it (Y leaves, so that it
	// does not keep taking the task back only to refuse it again).
	y.Shutdown()
	newWorker(fpX)
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone || st.Platform != fpX.PlatformKey() {
		t.Fatalf("run %+v, want done on %s", st, fpX.PlatformKey())
	}
	state, _, err := artifacts.ReadState(ctx, store, "tests.ThreeGraphs", fpX.PlatformKey(), "")
	if err != nil {
		t.Fatal(err)
	}
	if state.Platform != fpX.PlatformKey() || state.Target != "plat" {
		t.Fatalf("state platform %q target %q", state.Platform, state.Target)
	}
}

func TestHandBacksAreBounded(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = "orphan"
	sub, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	// The run is bound to a platform no worker here has.
	if _, err := env.client.Runs().BindPlatform(ctx, sub.Run, "gpu-gone-sm90-trt10.3.0-drv550"); err != nil {
		t.Fatal(err)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"orphan"}, Concurrency: 3, MaxHandBacks: 1})
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunFailed || st.Failed != 3 {
		t.Fatalf("run %+v, want every graph failed", st)
	}
	if g := st.Graphs["0"]; !strings.Contains(g.Message, "gpu-gone") || !strings.Contains(g.Message, "no worker of it") {
		t.Fatalf("graph 0 %+v does not say which platform was missing", g)
	}
}

// A machine with GPUs of two platforms learns a task's platform only from
// the slot it takes: the run binds to that slot's platform, and its state
// says so.
func TestMixedGPUMachineTunesInTheSlotItTakes(t *testing.T) {
	t.Parallel()
	env := startEmbedded(t)
	ctx := context.Background()
	fp := gpu.Fingerprint{Kind: gpu.KindGPU, DriverVersion: "550.54.15", TensorRTVersion: "10.3.0", GPUs: []gpu.GPU{
		{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-a", ComputeCapability: "8.0"},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-h", ComputeCapability: "9.0"},
	}}
	keys := map[string]bool{}
	for i := range fp.GPUs {
		dev, err := fp.ForDevice(i)
		if err != nil {
			t.Fatal(err)
		}
		keys[dev.PlatformKey()] = true
	}
	if len(keys) != 2 {
		t.Fatalf("the two GPUs share a platform key: %v", keys)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"mixed"}, Fingerprint: fp})
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = "mixed"
	dir := threeGraphBundle(t)
	b := open(t, dir)
	b.Manifest.Graphs = b.Manifest.Graphs[:1]
	sub, err := env.client.Submit(ctx, b, o)
	if err != nil {
		t.Fatal(err)
	}
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone || !keys[st.Platform] {
		t.Fatalf("run %+v, want done on one of %v", st, keys)
	}
	var res tuner.Result
	if err := artifacts.GetJSON(ctx, env.store, artifacts.GraphResultKey(sub.Run, "0"), &res); err != nil {
		t.Fatal(err)
	}
	if res.Platform != st.Platform {
		t.Fatalf("result tuned on %s, run bound to %s", res.Platform, st.Platform)
	}
	// A run already bound to the second GPU's platform (another machine
	// started it) takes that GPU's slot, though the first is free too: no
	// hand-back. It is bound before any worker serves its queue.
	h100, _ := fp.ForDevice(1)
	o.Target = "mixed2"
	sub2, err := env.client.Submit(ctx, b, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.Runs().BindPlatform(ctx, sub2.Run, h100.PlatformKey()); err != nil {
		t.Fatal(err)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"mixed2"}, Fingerprint: fp})
	st2 := wait(t, env.client.Runs(), sub2.Run)
	n, err := env.client.Runs().HandBacks(ctx, sub2.Run, "0")
	if err != nil {
		t.Fatal(err)
	}
	if st2.Status != runstate.RunDone || st2.Platform != h100.PlatformKey() || n != 0 {
		t.Fatalf("run bound to the H100: %+v after %d hand-back(s)", st2, n)
	}
}
