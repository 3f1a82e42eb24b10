package tuner_test

import (
	"context"
	"testing"

	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// The winner's speedup is measured against the least optimized candidate
// by default, against Options.Baseline when set, and a baseline that is no
// candidate is refused before anything is built.
func TestWinnerCarriesItsSpeedup(t *testing.T) {
	dir := realBundle(t)
	for _, tc := range []struct{ baseline, want string }{{"", "ort:cpu:disabled"}, {"ort:cpu:all", "ort:cpu:all"}} {
		opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:all,ort:cpu:disabled")
		opts.Baseline = tc.baseline
		r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		sp := r.Speedup()
		if !r.OK() || sp == nil || sp.Baseline != tc.want || sp.Ratio.Value <= 0 || sp.Ratio.Rounds == 0 || !(sp.Ratio.Lo <= sp.Ratio.Value && sp.Ratio.Value <= sp.Ratio.Hi) {
			t.Fatalf("baseline %q: winner %+v, speedup %+v: want one over %s with its interval", tc.baseline, r.Winner, sp, tc.want)
		}
		if sp.BatchSize == sp.BaselineBatchSize && !sp.Ratio.Paired {
			t.Errorf("speedup %+v at the same batch size is not paired: it was measured in the same rounds", sp)
		}
		if r.Winner.Candidate == tc.want && sp.Ratio.Value != 1 {
			t.Errorf("the winner is the baseline, yet its speedup is %g", sp.Ratio.Value)
		}
		t.Logf("winner %s: speedup %s", r.Winner.Candidate, sp.Text())
	}
	opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:all")
	opts.Baseline = "ort:cpu:basic"
	if err := opts.Validate(); err == nil {
		t.Error("a baseline that is no candidate passed Validate")
	}
}
