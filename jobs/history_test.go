package jobs_test

import (
	"context"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/runstate"
)

// checkHistory checks that a finalized run has exactly one history entry
// under its platform key and one under its target class, saying what the
// run's state says, and returns it.
func checkHistory(t *testing.T, store artifacts.Store, model string, st runstate.RunStatus) *history.Entry {
	t.Helper()
	ctx := context.Background()
	var cur *history.Entry
	for _, where := range []string{st.Platform, st.Target} {
		keys, err := history.Keys(ctx, store, model, where)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if history.RunOf(k) == st.Run {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("run %s has %d history entries under %s (keys %v), want 1", st.Run, n, where, keys)
		}
		e, _, err := history.Find(ctx, store, model, where, st.Run)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != st.Status || e.Platform != st.Platform || e.Target != st.Target || len(e.Graphs) != st.Total {
			t.Fatalf("history entry %+v, run %+v", e, st)
		}
		if _, err := store.Stat(ctx, e.StateKey); err != nil {
			t.Fatalf("history entry names state blob %s: %v", e.StateKey, err)
		}
		cur = e
	}
	return cur
}
