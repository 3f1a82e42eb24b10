package verdict

import (
	"testing"
	"time"
)

// TestOf: a row refuses a verdict when its tasks ran far from nominal
// (issue 30: a "small" task took 7.7 s instead of 73 ms and the row still
// said yes), and when the same work's time drifted between its legs.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		met  bool
		whys []string
		want string
	}{
		{"met", true, []string{Nominal("small", 80*time.Millisecond, 73*time.Millisecond)}, "yes"},
		{"not met", false, nil, "NO"},
		{"a loaded machine: undecided, met or not", true, []string{Nominal("small", 7700*time.Millisecond, 73*time.Millisecond)},
			"undecided (a small task took 7.7s, 105.5× its nominal 73ms: the machine is loaded)"},
		{"far below nominal too", false, []string{Nominal("small", 10*time.Millisecond, 73*time.Millisecond)},
			"undecided (a small task took 10ms, 0.1× its nominal 73ms: the machine is loaded)"},
		{"at the edge: decided", true, []string{Nominal("small", 219*time.Millisecond, 73*time.Millisecond)}, "yes"},
		{"drift", true, []string{"", Drift("the planned night's graphs", 1.4, 1.25)},
			"undecided (the planned night's graphs took 1.40× as long as before: the machine's speed changed)"},
		{"no drift", false, []string{Drift("the graphs", 0.9, 1.25)}, "NO"},
		{"rounds that agree", true, []string{Spread("the empty handler", []float64{100, 120, 110}, 1.5)}, "yes"},
		{"rounds that do not", true, []string{Spread("the empty handler", []float64{100, 40, 110}, 1.5)},
			"undecided (the empty handler varied 2.8× across rounds: the machine's load changed)"},
		{"two reasons", true, []string{Drift("the graphs", 0.5, 1.25), Nominal("long", 10*time.Second, time.Second)},
			"undecided (the graphs took 0.50× as long as before: the machine's speed changed; a long task took 10s, 10.0× its nominal 1s: the machine is loaded)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.met, tc.whys...); got != tc.want {
				t.Errorf("Of(%v, %q) = %q, want %q", tc.met, tc.whys, got, tc.want)
			}
		})
	}
}

// TestScaling: the per-item ratio of two sizes from their fastest rounds,
// undecided when the third fastest would turn it.
func TestScaling(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		small, large []time.Duration
		wantRatio    float64
		want         string
	}{
		{"flat", ms(10, 11, 12), ms(100, 105, 110), 1.0, "yes"},
		{"bends", ms(10, 11, 12), ms(400, 410, 420), 4.0, "NO"},
		{"rounds in any order", ms(12, 10, 11), ms(420, 400, 410), 4.0, "NO"},
		{"at the target: met", ms(10, 10, 10), ms(150, 150, 150), 1.5, "yes"},
		{"the spread turns it", ms(10, 11, 20), ms(140, 150, 160), 1.4,
			"undecided (the verdict changes within the rounds' spread (10: 140ms to 160ms; 1: 10ms to 20ms): the machine's load changed)"},
		{"too few rounds", ms(10), ms(100), 1.0, "undecided (fewer than three rounds a size)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ratio, got := Scaling("1", "10", 1, 10, tc.small, tc.large, 1.5)
			if got != tc.want || ratio < tc.wantRatio-1e-9 || ratio > tc.wantRatio+1e-9 {
				t.Errorf("Scaling = %.3f %q, want %.3f %q", ratio, got, tc.wantRatio, tc.want)
			}
		})
	}
}
