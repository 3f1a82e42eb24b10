package fleet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// TestReestimateWarnsWhenTheNightFallsBehind: a night planned to fit
// before its deadline is re-estimated from what its runs have left; the
// warning comes when that no longer fits on the workers there are now, and
// names the class short, how many workers would fit and what is left.
func TestReestimateWarnsWhenTheNightFallsBehind(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	deadline := t0.Add(2 * time.Hour)
	planned := t0.Add(90 * time.Minute)
	plan := &state.Plan{Nightly: "n1", Entries: []state.PlanEntry{
		{Model: "a", Target: "gpu.x", Run: "ra", Estimates: []state.GraphEstimate{{Graph: "0", Seconds: 3600}, {Graph: "1", Seconds: 1800}}},
		{Model: "b", Target: "gpu.x", Run: "rb", Estimates: []state.GraphEstimate{{Graph: "0", Seconds: 1800}}},
		{Model: "c", Target: "cpu", Run: "rc", Estimates: []state.GraphEstimate{{Graph: "0", Seconds: 60}}},
	}, Estimate: &state.PlanEstimate{Deadline: &deadline, ExpectedFinish: &planned, Classes: []state.ClassEstimate{
		{Class: "gpu.x", LongestSeconds: 3600, Workers: 2, WorkersFrom: state.WorkersRegistered},
		{Class: "cpu", LongestSeconds: 60, Workers: 1, WorkersFrom: state.WorkersRegistered}}}}
	pending := runstate.GraphStatus{Status: runstate.GraphPending}
	done := runstate.GraphStatus{Status: runstate.GraphDone}
	runs := func(a0, a1, b0 runstate.GraphStatus) map[string]runstate.RunStatus {
		return map[string]runstate.RunStatus{
			"ra": {Run: "ra", Status: runstate.RunRunning, Graphs: map[string]runstate.GraphStatus{"0": a0, "1": a1}},
			"rb": {Run: "rb", Status: runstate.RunRunning, Graphs: map[string]runstate.GraphStatus{"0": b0}},
			"rc": {Run: "rc", Status: runstate.RunDone, Graphs: map[string]runstate.GraphStatus{"0": done}},
		}
	}
	for _, tc := range []struct {
		name    string
		at      time.Duration
		runs    map[string]runstate.RunStatus
		workers map[string]int
		left    int
		want    []string // in the warning; none: no warning
	}{
		{"on plan: 2 workers, everything left at the start", 0, runs(pending, pending, pending), map[string]int{"gpu.x": 2}, 3, nil},
		{"a worker lost ten minutes in", 10 * time.Minute, runs(pending, pending, pending), map[string]int{"gpu.x": 1}, 3,
			[]string{"nightly n1 has fallen behind", "gpu.x: 1 worker(s), 2 would fit", "3 graph(s) left, 2h00m"}},
		{"no worker left", 40 * time.Minute, runs(pending, done, pending), map[string]int{}, 2,
			[]string{"gpu.x: no worker, 2 would fit", "2 graph(s) left"}},
		{"late in the night, the hour-long graph still to go", 70 * time.Minute, runs(pending, done, done), map[string]int{"gpu.x": 2}, 1,
			[]string{"its longest graph alone is expected to take 1h00m"}},
		{"late in the night, what is left fits", 70 * time.Minute, runs(done, done, pending), map[string]int{"gpu.x": 1}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fleet.Reestimate(plan, tc.runs, tc.workers, t0.Add(tc.at))
			if p.Left["gpu.x"] != tc.left || p.Left["cpu"] != 0 {
				t.Errorf("left %v: want gpu.x %d and nothing of the finished cpu run", p.Left, tc.left)
			}
			w := fleet.LateWarning(plan, p)
			if len(tc.want) == 0 {
				if w != "" {
					t.Errorf("warning %q: want none", w)
				}
				return
			}
			for _, s := range tc.want {
				if !strings.Contains(w, s) {
					t.Errorf("warning %q: want %q in it", w, s)
				}
			}
		})
	}

	// A night already short at submit was warned about then.
	short := *plan
	est := *plan.Estimate
	est.Short = []state.ShortClass{{Class: "gpu.x", Workers: 1, Needed: 2}}
	short.Estimate = &est
	if w := fleet.LateWarning(&short, fleet.Reestimate(&short, runs(pending, pending, pending), map[string]int{}, t0)); w != "" {
		t.Errorf("a night short at submit warned again: %q", w)
	}

	// A first night's plan was a guess: the warning says so.
	guessed := *plan
	gest := *plan.Estimate
	gest.Guess = true
	guessed.Estimate = &gest
	if w := fleet.LateWarning(&guessed, fleet.Reestimate(&guessed, runs(pending, pending, pending), map[string]int{"gpu.x": 1}, t0.Add(10*time.Minute))); !strings.Contains(w, "planned 2026-12-02T23:30:00Z, a guess: no history yet") {
		t.Errorf("warning of a guessed night %q: want its plan called a guess", w)
	}
}
