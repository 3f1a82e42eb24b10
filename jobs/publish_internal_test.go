package jobs

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
)

// The result a finished run publishes is the one of the attempt Redis
// recorded as completing the graph, whatever other attempts wrote, before
// or after.
func TestPublishResultsTakesTheCompletingAttempt(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const run = "m-1"
	spec := &RunSpec{Run: run, Manifest: bundle.Manifest{Graphs: []bundle.Graph{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}}
	put := func(key, body string) {
		t.Helper()
		if err := store.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) string {
		t.Helper()
		rc, err := store.Get(ctx, key)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	// a: attempt 1 (presumed dead) and attempt 2 both wrote; 2 completed.
	put(artifacts.GraphAttemptResultKey(run, "a", 1), "a1")
	put(artifacts.GraphAttemptResultKey(run, "a", 2), "a2")
	// b: only attempt 1, which completed it.
	put(artifacts.GraphAttemptResultKey(run, "b", 1), "b1")
	// c: a run recorded before attempt keys: the status names result.json.
	put(artifacts.GraphResultKey(run, "c"), "c-old")
	// d: failed without a result (the error handler archived it).
	st := RunStatus{Graphs: map[string]GraphStatus{
		"a": {Status: GraphDone, ResultKey: artifacts.GraphAttemptResultKey(run, "a", 2)},
		"b": {Status: GraphDone, ResultKey: artifacts.GraphAttemptResultKey(run, "b", 1)},
		"c": {Status: GraphDone, ResultKey: artifacts.GraphResultKey(run, "c")},
		"d": {Status: GraphFailed, Class: "infrastructure"},
	}}
	if err := publishResults(ctx, store, spec, st); err != nil {
		t.Fatal(err)
	}
	// A late duplicate of a's attempt 1 rewrites its own key after
	// finalize; a repeated finalize publishes the same.
	put(artifacts.GraphAttemptResultKey(run, "a", 1), "a1-late")
	if err := publishResults(ctx, store, spec, st); err != nil {
		t.Fatal(err)
	}
	for graph, want := range map[string]string{"a": "a2", "b": "b1", "c": "c-old"} {
		if got := get(artifacts.GraphResultKey(run, graph)); got != want {
			t.Errorf("graph %s result.json = %q, want %q", graph, got, want)
		}
	}
	if _, err := store.Stat(ctx, artifacts.GraphResultKey(run, "d")); err == nil {
		t.Error("graph d has a result.json, but no attempt wrote one")
	}
}
