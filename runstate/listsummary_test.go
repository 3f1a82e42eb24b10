package runstate_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/runstate"
)

// finalRun records a run of n graphs, every one done with a winner (two
// candidates taking turns), finished done; with summary, finalize's
// summary recorded as finalize records it.
func finalRun(tb testing.TB, runs *runstate.Runs, run, model string, n int, summary bool) runstate.RunStatus {
	tb.Helper()
	ctx := context.Background()
	graphs := make([]string, n)
	for i := range graphs {
		graphs[i] = fmt.Sprint(i)
	}
	if _, err := runs.Create(ctx, run, model, "cpu", graphs); err != nil {
		tb.Fatal(err)
	}
	for i, g := range graphs {
		winner := []string{"ort:cpu:all", "ort:cpu:basic"}[i%2]
		if _, _, err := runs.CompleteGraph(ctx, run, g, runstate.GraphStatus{Status: runstate.GraphDone, Winner: winner}); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := runs.Finish(ctx, run, runstate.RunDone, "", ""); err != nil {
		tb.Fatal(err)
	}
	st, err := runs.Get(ctx, run)
	if err != nil {
		tb.Fatal(err)
	}
	if summary {
		if err := runs.SetSummary(ctx, run, st.Summary()); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// A final run whose summary finalize recorded is listed without its
// graphs, with the same summary and counts; ListOptions.Graphs lists it
// whole, and a run with no recorded summary (finalized before summaries
// were kept) is listed whole and summed up from its graphs as before.
func TestListReadsTheRecordedSummary(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	with := finalRun(t, runs, "sum-with", "sum", 3, true)
	time.Sleep(2 * time.Millisecond)
	without := finalRun(t, runs, "sum-without", "sum", 3, false)
	want := with.Summary()
	if want.Winners != "ort:cpu:all ×2, ort:cpu:basic" {
		t.Fatalf("fixture's summary %+v", want)
	}
	for _, c := range []struct {
		graphs          bool
		withN, withoutN int
	}{{false, 0, 3}, {true, 3, 3}} {
		list, err := runs.List(ctx, runstate.ListOptions{Model: "sum", Graphs: c.graphs})
		if err != nil || len(list) != 2 {
			t.Fatalf("List(graphs %v): %d runs, %v", c.graphs, len(list), err)
		}
		got := map[string]runstate.RunStatus{list[0].Run: list[0], list[1].Run: list[1]}
		for run, n := range map[string]int{with.Run: c.withN, without.Run: c.withoutN} {
			st := got[run]
			if len(st.Graphs) != n || st.Done != 3 || st.Total != 3 || st.Status != runstate.RunDone || st.FinishedAt.IsZero() {
				t.Errorf("List(graphs %v): %s listed with %d graphs, %d/%d done, %s: want %d graphs, 3/3, done", c.graphs, run, len(st.Graphs), st.Done, st.Total, st.Status, n)
			}
			if !reflect.DeepEqual(st.Summary(), want) {
				t.Errorf("List(graphs %v): %s's summary %+v, want %+v", c.graphs, run, st.Summary(), want)
			}
		}
	}
}

// BenchmarkRunsListByRunSize measures a page of the runs list (the web
// UI's, 25 runs) whose runs have 20 graphs and one whose runs have 500
// (issue 35's 100,000-graph night: runs of 500 graphs made the runs page
// 44× slower than with runs of 20), in nine alternating rounds, two ways:
// as listed now (a final run's recorded summary, not its graphs) and with
// every run read whole (ListOptions.Graphs, what every listing did before
// summaries were recorded). It prints each way's ratio, 500 ÷ 20 graphs a
// run (target ≤ 1.5: a page's cost independent of its runs' size).
func BenchmarkRunsListByRunSize(b *testing.B) {
	ctx := context.Background()
	const small, large = 20, 500
	fixture := func(n int) *runstate.Runs {
		runs := ownRuns(b)
		for i := range listPage {
			finalRun(b, runs, fmt.Sprintf("m-%03d", i), "m", n, true)
		}
		return runs
	}
	s, l := fixture(small), fixture(large)
	list := func(runs *runstate.Runs, graphs bool) time.Duration {
		began := time.Now()
		for range listRepeats {
			page, err := runs.List(ctx, runstate.ListOptions{Limit: listPage, Graphs: graphs})
			if err != nil || len(page) != listPage {
				b.Fatalf("List: %d runs, %v", len(page), err)
			}
		}
		return time.Since(began) / listRepeats
	}
	type rounds struct{ s, l []time.Duration }
	var now, whole rounds
	b.ResetTimer()
	for range b.N {
		for range 9 {
			now.s, now.l = append(now.s, list(s, false)), append(now.l, list(l, false))
			whole.s, whole.l = append(whole.s, list(s, true)), append(whole.l, list(l, true))
		}
	}
	b.StopTimer()
	for _, w := range []struct {
		name string
		r    rounds
	}{{"final runs' summaries (now)", now}, {"every run read whole (before)", whole}} {
		ratio, met := verdict.Scaling(fmt.Sprint(small, " graphs a run"), fmt.Sprint(large, " graphs a run"), 1, 1, w.r.s, w.r.l, 1.5)
		fmt.Printf("runs list, a page of %d, %s: %v with runs of %d graphs, %v with runs of %d: %d ÷ %d = %.2f (target ≤ 1.5: flat), met: %s\n",
			listPage, w.name, minDur(w.r.s).Round(time.Microsecond), small, minDur(w.r.l).Round(time.Microsecond), large, large, small, ratio, met)
	}
}
