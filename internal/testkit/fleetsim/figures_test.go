package fleetsim

import (
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
