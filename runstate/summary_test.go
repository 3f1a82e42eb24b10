package runstate

import (
	"math"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/noise"
	"github.com/tunefleet/tunefleet/strategy"
)

func TestSummary(t *testing.T) {
	sp := func(v float64) *strategy.Speedup {
		return &strategy.Speedup{Baseline: "ort:cpu:disabled", Ratio: noise.Ratio{Value: v, Lo: v * 0.9, Hi: v * 1.1, Rounds: 5}}
	}
	st := RunStatus{Graphs: map[string]GraphStatus{
		"0": {Status: GraphDone, Winner: "ort:cpu:all", Speedup: sp(2)},
		"1": {Status: GraphDone, Winner: "ort:cpu:basic", Speedup: sp(8), Reason: "reused: x", ReusedFrom: "m-1"},
		"2": {Status: GraphDone, Winner: "ort:cpu:all", Reason: "reused: y"},
		"3": {Status: GraphFailed, Class: "build"},
	}}
	s := st.Summary()
	if s.Winners != "ort:cpu:all ×2, ort:cpu:basic" || math.Abs(s.Speedup-4) > 1e-9 || s.SpeedupGraphs != 2 || s.Reused != 2 ||
		len(s.ReusedFrom) != 1 || s.ReusedFrom[0] != "m-1" {
		t.Errorf("summary %+v: want winners ort:cpu:all ×2, ort:cpu:basic; speedup 4 (geometric mean of 2 and 8) over 2 graphs; 2 reused, from m-1", s)
	}
	if s := (RunStatus{}).Summary(); s.Winners != "" || s.Speedup != 0 || s.Reused != 0 {
		t.Errorf("empty run's summary %+v", s)
	}
}

func TestModelLike(t *testing.T) {
	for _, tc := range []struct {
		model, pattern string
		want           bool
	}{
		{"demo_model", "demo", true}, {"demo_model", "model", true}, {"demo_model", "", true},
		{"demo_model", "^demo", true}, {"demo_model", "^model", false}, {"demo_model", "nosuch", false},
	} {
		if got := ModelLike(tc.model, tc.pattern); got != tc.want {
			t.Errorf("ModelLike(%q, %q) = %v, want %v", tc.model, tc.pattern, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	if d := (RunStatus{CreatedAt: t0, FinishedAt: t0.Add(90 * time.Second)}).Duration(t0.Add(time.Hour)); d != 90*time.Second {
		t.Errorf("a finished run took %s, want 1m30s", d)
	}
	if d := (RunStatus{CreatedAt: t0}).Duration(t0.Add(time.Minute)); d != time.Minute {
		t.Errorf("a running run has taken %s, want 1m0s", d)
	}
}
