package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/resultindex"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// countingBackend is the real ONNX Runtime backend with a count of the
// engines it was asked to build for one graph.
type countingBackend struct {
	backend.Backend
	graph  string
	builds atomic.Int64
}

func (c *countingBackend) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	if req.Graph.Name == c.graph {
		c.builds.Add(1)
	}
	return c.Backend.Build(ctx, req)
}

// A candidate that gave wrong answers on graph 0 is not built again by the
// next run of the same work on the same platform and toolchain: its
// result says it was skipped and why, and the graph fails with the same
// class. --retry-failed builds it again, and so does a toolchain change.
func TestNegativeCacheSkipsKnownFailures(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	perturb(t, dir) // graph 0's reference output is wrong: wrong_answer
	root := t.TempDir()
	store, err := artifacts.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { validateStoredDocs(t, root) })
	counted := &countingBackend{Backend: ort.New(ort.Options{}), graph: "0"}
	e, err := jobs.StartEmbedded(jobs.WorkerConfig{
		Store: store, Backends: backend.Registry{"ort": counted}, Queues: []string{"cpu"}, Concurrency: 2, WorkDir: t.TempDir(),
		RetryUnit: testRetryUnit,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(e.Redis, store)
	t.Cleanup(func() { c.Close(); e.Close() })
	ctx := context.Background()

	// tune submits a new run (Force) and returns graph 0's result.
	tune := func(retryFailed bool) (runstate.RunStatus, *tuner.Result) {
		t.Helper()
		o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
		o.Force, o.RetryFailed = true, retryFailed
		sub, err := c.Submit(ctx, open(t, dir), o)
		if err != nil {
			t.Fatal(err)
		}
		st := wait(t, c.Runs(), sub.Run)
		if st.Status != runstate.RunFailed || st.Graphs["0"].Class != string(backend.FailWrongAnswer) || st.Done != 2 {
			t.Fatalf("run %+v, want graph 0 failed with wrong_answer and the others done", st)
		}
		var res tuner.Result
		if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(sub.Run, "0"), &res); err != nil {
			t.Fatal(err)
		}
		return st, &res
	}

	_, first := tune(false)
	if n := counted.builds.Load(); n != 1 {
		t.Fatalf("first run built graph 0 %d times, want 1", n)
	}
	if first.Results[0].SkipReason != "" {
		t.Fatalf("first run skipped the candidate: %+v", first.Results[0])
	}
	entries, err := store.List(ctx, "results/"+first.Platform+"/")
	if err != nil {
		t.Fatal(err)
	}
	var entryKey string
	for _, k := range entries {
		if strings.Contains(k, ".failed/") {
			entryKey = k
		}
	}
	if !strings.HasSuffix(entryKey, ".failed/ort:cpu:basic.json") {
		t.Fatalf("no negative cache entry among %q", entries)
	}

	_, second := tune(false)
	if n := counted.builds.Load(); n != 1 {
		t.Errorf("second run built graph 0 again (%d builds, want 1)", n)
	}
	cr := second.Results[0]
	if cr.Status != backend.StatusFailed || cr.Failure == nil || cr.Failure.Class != backend.FailWrongAnswer ||
		!strings.Contains(cr.SkipReason, "negative cache") || !strings.Contains(cr.SkipReason, "--retry-failed") {
		t.Errorf("second run's candidate %+v, want failed (wrong_answer) and skipped by the negative cache", cr)
	}

	if _, res := tune(true); counted.builds.Load() != 2 || res.Results[0].SkipReason != "" {
		t.Errorf("--retry-failed: %d builds (want 2), skip reason %q", counted.builds.Load(), res.Results[0].SkipReason)
	}

	// An entry recorded by another ORT build is not trusted.
	var entry resultindex.NegativeEntry
	if err := artifacts.GetJSON(ctx, store, entryKey, &entry); err != nil {
		t.Fatal(err)
	}
	entry.Toolchain.ORT = "0.0.1-older"
	raw, _ := json.Marshal(entry)
	if err := store.Put(ctx, entryKey, strings.NewReader(string(raw)), int64(len(raw))); err != nil {
		t.Fatal(err)
	}
	if _, res := tune(false); counted.builds.Load() != 3 || res.Results[0].SkipReason != "" {
		t.Errorf("after a toolchain change: %d builds (want 3), skip reason %q", counted.builds.Load(), res.Results[0].SkipReason)
	}
	// The rebuild recorded the current toolchain again: the next run skips.
	if _, res := tune(false); counted.builds.Load() != 3 || res.Results[0].SkipReason == "" {
		t.Errorf("after the re-recording: %d builds (want 3), skip reason %q", counted.builds.Load(), res.Results[0].SkipReason)
	}
}
