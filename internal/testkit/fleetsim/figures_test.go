package fleetsim

import (
	"cmp"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
)

// finalizeRate's rate is the night's graphs over its runs' finalize times,
// and its interval the spread of that rate over the runs: none when every
// run finalized as fast, wide when they differ, and the same for the same
// night (seeded).
func TestFinalizeRate(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	// night builds runs of 20 graphs whose last graph ends at t0 and whose
	// finalize took each of took.
	night := func(took ...time.Duration) ([]graphResult, []runstate.RunStatus) {
		var results []graphResult
		var recs []runstate.RunStatus
		for i, d := range took {
			results = append(results, graphResult{run: i, start: t0.Add(-time.Second), dur: time.Second},
				graphResult{run: i, start: t0.Add(-2 * time.Second), dur: time.Second})
			recs = append(recs, runstate.RunStatus{Total: 20, FinishedAt: t0.Add(d)})
		}
		return results, recs
	}
	for _, tc := range []struct {
		name        string
		took        []time.Duration
		rate        float64
		spansTarget bool // 500 graphs/s within [lo, hi]
		equalBounds bool
	}{
		{"every run alike", []time.Duration{40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}, 500, true, true},
		{"fast runs", []time.Duration{20 * time.Millisecond, 22 * time.Millisecond, 21 * time.Millisecond, 19 * time.Millisecond}, 80 / 0.082, false, false},
		{"spread about the target", []time.Duration{10 * time.Millisecond, 80 * time.Millisecond, 15 * time.Millisecond, 60 * time.Millisecond, 30 * time.Millisecond, 45 * time.Millisecond}, 120 / 0.24, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, recs := night(tc.took...)
			rate, lo, hi, n := finalizeRate(results, recs)
			if n != len(tc.took) {
				t.Errorf("%d runs counted, want %d", n, len(tc.took))
			}
			if d := rate - tc.rate; d > 1e-6 || d < -1e-6 {
				t.Errorf("rate %.3f graphs/s, want %.3f", rate, tc.rate)
			}
			if lo > rate || hi < rate {
				t.Errorf("interval %.1f–%.1f does not hold the rate %.1f", lo, hi, rate)
			}
			if (lo == hi) != tc.equalBounds {
				t.Errorf("interval %.1f–%.1f; want equal bounds %v", lo, hi, tc.equalBounds)
			}
			if spans := lo <= 500 && hi >= 500; spans != tc.spansTarget {
				t.Errorf("interval %.1f–%.1f spans 500: %v, want %v", lo, hi, spans, tc.spansTarget)
			}
			if _, lo2, hi2, _ := finalizeRate(results, recs); lo2 != lo || hi2 != hi {
				t.Errorf("the same night gave %.3f–%.3f, then %.3f–%.3f", lo, hi, lo2, hi2)
			}
		})
	}
	// A run that finished before its last graph ended (a clock step) or
	// has no graph read back is left out.
	results, recs := night(40*time.Millisecond, 40*time.Millisecond)
	recs[1].FinishedAt = t0.Add(-time.Hour)
	recs = append(recs, runstate.RunStatus{Total: 20, FinishedAt: t0})
	if _, _, _, n := finalizeRate(results, recs); n != 1 {
		t.Errorf("%d runs counted, want 1", n)
	}
}

// Compare's verdicts: a growth within its bound is flat (or linear in what
// the view shows), past it a bend, and undecided where the rounds' spread
// (or a loaded machine, for a wall-clock figure past its bound) could put
// it on either side.
func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		small Row
		large Row
		met   string // the verdict's first word
	}{
		{"flat per graph", Row{Value: 10}, Row{Value: 12}, "yes"},
		{"bends per graph", Row{Value: 10}, Row{Value: 20}, "NO"},
		{"linear in what it shows", Row{Value: 10, Shows: 100}, Row{Value: 90, Shows: 1000}, "yes"},
		{"more than linear", Row{Value: 10, Shows: 100}, Row{Value: 200, Shows: 1000}, "NO"},
		{"a rate that fell by less than its bound", Row{Name: "finalize throughput", Value: 500}, Row{Name: "finalize throughput", Value: 400}, "yes"},
		{"a rate that fell past it", Row{Name: "finalize throughput", Value: 500}, Row{Name: "finalize throughput", Value: 300}, "NO"},
		{"rounds that decide: all past the bound", Row{Value: 2, Lo: 1.9, Hi: 2.1, Wall: true}, Row{Value: 4, Lo: 3.9, Hi: 4.2, Wall: true}, "NO"},
		{"rounds that cannot decide a bend", Row{Value: 2, Lo: 1.5, Hi: 3.5, Wall: true}, Row{Value: 4, Lo: 3.5, Hi: 4.5, Wall: true}, "undecided"},
		{"rounds that cannot decide flat", Row{Value: 3, Lo: 2, Hi: 3, Wall: true}, Row{Value: 4, Lo: 3.5, Hi: 4.5, Wall: true}, "undecided"},
		{"rounds that decide flat", Row{Value: 50, Lo: 48, Hi: 52, Wall: true}, Row{Value: 55, Lo: 54, Hi: 60, Wall: true}, "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := cmp.Or(tc.small.Name, "row")
			tc.small.Name, tc.large.Name = name, name
			tc.small.Target, tc.large.Target = "x", "x"
			rows := Compare([]Result{{Config: Config{Models: 1, GraphsPerModel: 1}, Rows: []Row{tc.small}},
				{Config: Config{Models: 10, GraphsPerModel: 1}, Rows: []Row{tc.large}}})
			if len(rows) != 1 {
				t.Fatalf("%d rows", len(rows))
			}
			if got := strings.Fields(rows[0].Met)[0]; got != tc.met {
				t.Errorf("%s: met %q, want %s", rows[0].Measured, rows[0].Met, tc.met)
			}
		})
	}
}
