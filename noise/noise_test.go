package noise_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tunefleet/tunefleet/noise"
)

func TestStudentT(t *testing.T) {
	for _, tc := range []struct{ df, p, want float64 }{
		{1, 0.975, 12.706}, {4, 0.975, 2.776}, {10, 0.975, 2.228}, {29, 0.975, 2.045}, {1000, 0.975, 1.962},
	} {
		if got := noise.StudentT(tc.df, tc.p); math.Abs(got-tc.want) > 0.002 {
			t.Errorf("StudentT(%g, %g) = %.4f, want %.3f", tc.df, tc.p, got, tc.want)
		}
	}
}

// A 0.2 ms stall among 3 µs calls is an outlier and does not move the
// estimate.
func TestTrimmedDropsStalls(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = 0.003 + 0.0001*float64(i%5)
	}
	xs[17], xs[60] = 0.2, 0.209
	f := noise.TukeyFences(xs)
	m, dropped := noise.Trimmed(xs, f)
	if dropped != 2 {
		t.Errorf("dropped %d calls, want the 2 stalls", dropped)
	}
	if m > 0.0033 {
		t.Errorf("trimmed mean %g carries the stalls", m)
	}
	if cv := noise.CVInside(xs, f); cv > 0.1 {
		t.Errorf("cv inside the fences %g", cv)
	}
}

func TestCompareCosts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := func(base float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = base * (1 + 0.05*rng.NormFloat64())
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		a, b   []float64
		paired bool
		want   noise.Verdict
	}{
		{"same engine, one measurement", []float64{1, 2, 3}, []float64{1, 2, 3}, true, noise.Tie},
		{"within noise", rounds(1, 10), rounds(1, 10), true, noise.Tie},
		{"a 1.3x faster", rounds(1, 10), rounds(1.3, 10), true, noise.Better},
		{"a 1.3x slower, unpaired", rounds(1.3, 8), rounds(1, 12), false, noise.Worse},
		{"one round each: no spread, no verdict", []float64{1}, []float64{2}, false, noise.Tie},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := noise.CompareCosts(tc.a, tc.b, tc.paired)
			if got := r.Decide(noise.MinGain); got != tc.want {
				t.Errorf("verdict %v, want %v (ratio %.3f [%.3f, %.3f])", got, tc.want, r.Value, r.Lo, r.Hi)
			}
			if !(r.Lo <= r.Value && r.Value <= r.Hi) {
				t.Errorf("ratio %.3f outside its interval [%.3f, %.3f]", r.Value, r.Lo, r.Hi)
			}
		})
	}
}

// A round swallowed by a pause (here 13.6 ms in a round of 2.5 µs calls:
// the rounds CI recorded for a tiny MLP, beside the 20-fold heavier graph
// that replaced it) is left out, so the 20-fold change reads as one; a
// round 1.5 times off, as a loaded machine gives, stays in.
func TestCompareCostsLeavesOutASwallowedRound(t *testing.T) {
	before := []float64{0.002484, 0.002465, 0.002465, 0.002475, 0.00251425, 0.002475, 0.002485, 0.002475, 13.639206, 0.002475}
	after := []float64{0.050837, 0.05105975, 0.052776, 0.050921999999999995, 0.054444, 0.05278, 0.051168, 0.05047925, 0.05093525, 0.0510945}
	for _, paired := range []bool{false, true} {
		r := noise.CompareCosts(after, before, paired)
		if got := r.Decide(noise.MinGain); got != noise.Worse {
			t.Errorf("paired %v: %v (ratio %.4f [%.4f, %.4f] over %d rounds), want worse", paired, got, r.Value, r.Lo, r.Hi, r.Rounds)
		}
		if want := 9; r.Rounds != want {
			t.Errorf("paired %v: %d rounds compared, want %d (the swallowed one left out)", paired, r.Rounds, want)
		}
	}
	// A round 1.5x off is noise a loaded machine makes: it stays in, and
	// widens the interval as it should.
	mild := []float64{1, 1.02, 0.99, 1.01, 1.5, 1, 0.98, 1.01}
	if r := noise.CompareCosts(mild, []float64{1, 1.01, 0.99, 1, 1.02, 0.98, 1, 1, 1.01, 0.99}, false); r.Rounds != len(mild) {
		t.Errorf("a round 1.5x off was left out: %d rounds compared", r.Rounds)
	}
	if r := noise.CompareCosts([]float64{1, 1, 1, 50}, []float64{1, 1, 1, 1}, false); r.Decide(noise.MinGain) != noise.Tie {
		t.Errorf("four rounds: nothing to go by, nothing left out: want a tie, got %v", r.Decide(noise.MinGain))
	}
}

// A ratio of the new measurement over the old reads as the move of its
// time per sample, at the minimum gain asked: the bounds, not the value,
// decide.
func TestRatioMove(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        noise.Ratio
		minGain  float64
		want     noise.Move
		wantText string
	}{
		{"new beyond 1 + the gain: faster", noise.Ratio{Value: 1.3, Lo: 1.2, Hi: 1.4}, 0.05, noise.Faster, "faster"},
		{"new below 1/(1 + the gain): slower", noise.Ratio{Value: 0.7, Lo: 0.6, Hi: 0.8}, 0.05, noise.Slower, "slower"},
		{"interval across 1", noise.Ratio{Value: 1.3, Lo: 0.9, Hi: 1.7}, 0.05, noise.WithinNoise, "within_noise"},
		{"beyond 1 but under the gain", noise.Ratio{Value: 1.04, Lo: 1.02, Hi: 1.06}, 0.05, noise.WithinNoise, "within_noise"},
		{"the same interval at a smaller gain", noise.Ratio{Value: 1.04, Lo: 1.02, Hi: 1.06}, 0.01, noise.Faster, "faster"},
	} {
		m := tc.r.Move(tc.minGain)
		if m != tc.want || m.String() != tc.wantText {
			t.Errorf("%s: %d %q, want %d %q", tc.name, m, m, tc.want, tc.wantText)
		}
	}
	if noise.Slower != +1 || noise.Faster != -1 || noise.WithinNoise != 0 {
		t.Errorf("moves %d/%d/%d: history reports them as the sign of the change in time per sample (+1 slower)", noise.Slower, noise.Faster, noise.WithinNoise)
	}
}

// Drift that hits both sides of every round alike (a neighbour's load)
// cancels in a paired comparison: 10 % real difference under 40 % drift.
func TestPairedCancelsDrift(t *testing.T) {
	var a, b []float64
	for i := range 10 {
		drift := 1 + 0.4*float64(i%3)
		a = append(a, drift*1.0*(1+0.002*float64(i%2)))
		b = append(b, drift*1.10)
	}
	if got := noise.CompareCosts(a, b, true).Decide(noise.MinGain); got != noise.Better {
		t.Errorf("paired: %v, want better", got)
	}
	if got := noise.CompareCosts(a, b, false).Decide(noise.MinGain); got != noise.Tie {
		t.Errorf("unpaired under drift: %v, want tie", got)
	}
}

// An interval without an upper bound survives JSON (which has no infinity).
func TestRatioJSON(t *testing.T) {
	r := noise.CompareCosts([]float64{1}, []float64{2}, false)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back noise.Ratio
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != r {
		t.Errorf("%s read back as %+v, want %+v", b, back, r)
	}
}
