package jobs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// The result a finished run publishes is the one of the attempt Redis
// recorded as completing the graph, whatever other attempts wrote, before
// or after.
func TestPublishResultsTakesTheCompletingAttempt(t *testing.T) {
	t.Parallel()
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
	// A result named by who wrote it.
	res := func(who string) string { return `{"format":"tunefleet.result/v1","worker":"` + who + `"}` }
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
	put(artifacts.GraphAttemptResultKey(run, "a", 1), res("a1"))
	put(artifacts.GraphAttemptResultKey(run, "a", 2), res("a2"))
	// b: only attempt 1, which completed it.
	put(artifacts.GraphAttemptResultKey(run, "b", 1), res("b1"))
	// c: a run recorded before attempt keys: the status names result.json.
	put(artifacts.GraphResultKey(run, "c"), res("c-old"))
	// d: failed without a result (the error handler archived it).
	st := runstate.RunStatus{Graphs: map[string]runstate.GraphStatus{
		"a": {Status: runstate.GraphDone, ResultKey: artifacts.GraphAttemptResultKey(run, "a", 2)},
		"b": {Status: runstate.GraphDone, ResultKey: artifacts.GraphAttemptResultKey(run, "b", 1)},
		"c": {Status: runstate.GraphDone, ResultKey: artifacts.GraphResultKey(run, "c")},
		"d": {Status: runstate.GraphFailed, Class: "infrastructure"},
	}}
	if _, err := publishedResults(ctx, store, spec, st); err != nil {
		t.Fatal(err)
	}
	// A late duplicate of a's attempt 1 rewrites its own key after
	// finalize; a repeated finalize publishes the same.
	put(artifacts.GraphAttemptResultKey(run, "a", 1), res("a1-late"))
	results, err := publishedResults(ctx, store, spec, st)
	if err != nil {
		t.Fatal(err)
	}
	for graph, want := range map[string]string{"a": "a2", "b": "b1", "c": "c-old"} {
		if got := get(artifacts.GraphResultKey(run, graph)); got != res(want) {
			t.Errorf("graph %s result.json = %q, want %q", graph, got, res(want))
		}
		if r := results[graph]; r == nil || r.Worker != want {
			t.Errorf("graph %s: publishResults gave %+v, want the result of %s", graph, r, want)
		}
	}
	if r, ok := results["d"]; ok {
		t.Errorf("graph d has a result %+v, but no attempt wrote one", r)
	}
	if _, err := store.Stat(ctx, artifacts.GraphResultKey(run, "d")); err == nil {
		t.Error("graph d has a result.json, but no attempt wrote one")
	}
}

// A result that does not decode stops finalize with the key to look at,
// rather than a state that calls the graph unresolved.
func TestPublishResultsRefusesACorruptResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec := &RunSpec{Run: "m-2", Manifest: bundle.Manifest{Graphs: []bundle.Graph{{Name: "a"}}}}
	key := artifacts.GraphAttemptResultKey("m-2", "a", 1)
	if err := store.Put(ctx, key, strings.NewReader("{not json"), 9); err != nil {
		t.Fatal(err)
	}
	st := runstate.RunStatus{Graphs: map[string]runstate.GraphStatus{"a": {Status: runstate.GraphDone, ResultKey: key}}}
	_, err = publishedResults(ctx, store, spec, st)
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("error %v, want one naming %s", err, key)
	}
	if _, err := store.Stat(ctx, artifacts.GraphResultKey("m-2", "a")); err == nil {
		t.Fatal("a corrupt result was published")
	}
}

// publishedResults is publishResults with the results it hands over, by
// graph, checked to come in the manifest's order.
func publishedResults(ctx context.Context, store artifacts.Store, spec *RunSpec, st runstate.RunStatus) (map[string]*tuner.Result, error) {
	out := map[string]*tuner.Result{}
	next := 0
	err := publishResults(ctx, store, spec, st, func(i int, r *tuner.Result) error {
		if i != next {
			return fmt.Errorf("graph %d handed over after %d graphs", i, next)
		}
		next++
		if r != nil {
			out[spec.Manifest.Graphs[i].Name] = r
		}
		return nil
	})
	if err == nil && next != len(spec.Manifest.Graphs) {
		err = fmt.Errorf("%d graphs of %d handed over", next, len(spec.Manifest.Graphs))
	}
	return out, err
}
