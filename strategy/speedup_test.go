package strategy

import (
	"math"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/noise"
)

func TestDefaultBaseline(t *testing.T) {
	for _, tc := range []struct {
		cands []string
		want  string
	}{
		{[]string{"ort:cpu:extended", "ort:cpu:disabled", "ort:cpu:all"}, "ort:cpu:disabled"},
		{[]string{"ort:cpu:all", "ort:cpu:basic"}, "ort:cpu:basic"},
		{[]string{"trt:fp16", "trt:fp32", "trt:best"}, "trt:fp32"},
		{[]string{"trt:fp32", "ort:cuda:all"}, "ort:cuda:all"},
		{[]string{"ort:cpu:extended:threads=2", "ort:cpu:extended"}, "ort:cpu:extended:threads=2"}, // equals: the first
		{nil, ""},
	} {
		if got := DefaultBaseline(tc.cands); got != tc.want {
			t.Errorf("DefaultBaseline(%v) = %q, want %q", tc.cands, got, tc.want)
		}
	}
}

// The speedup compares the winner with the baseline at the winner's batch
// size, round by round, and falls back to the baseline's best (unpaired)
// when its sweep never reached that batch.
func TestSpeedupOver(t *testing.T) {
	results := []backend.CandidateResult{
		passed("ort:cpu:disabled", st(1, 2), st(8, 8)),
		passed("ort:cpu:all", st(1, 1), st(8, 4), st(32, 8)),
		failed("ort:cpu:basic", backend.FailBuild, "build", "no"),
	}
	sel, err := mustParse(t, MaxThroughput, 0).Select(results)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		sel      Selection
		baseline string
		want     float64
		paired   bool
		baseBS   int
		none     bool
	}{
		{name: "default baseline, not measured at the winner's batch", sel: sel, want: 4, baseBS: 8},
		{name: "same batch: paired", sel: Selection{Index: 1, BatchSize: 8, Candidate: "ort:cpu:all"}, want: 2, paired: true, baseBS: 8},
		{name: "winner is the baseline", sel: Selection{Index: 0, BatchSize: 8}, want: 1, paired: true, baseBS: 8},
		{name: "failed baseline", sel: sel, baseline: "ort:cpu:basic", none: true},
		{name: "unknown baseline", sel: sel, baseline: "trt:fp16", none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := SpeedupOver(results, tc.sel, tc.baseline)
			if tc.none {
				if sp != nil {
					t.Fatalf("speedup %+v, want none", sp)
				}
				return
			}
			if sp == nil {
				t.Fatal("no speedup")
			}
			if math.Abs(sp.Ratio.Value-tc.want) > 1e-3 || sp.Ratio.Paired != tc.paired || sp.BaselineBatchSize != tc.baseBS {
				t.Errorf("speedup %+v (%s), want %g paired=%v at baseline batch %d", sp, sp.Text(), tc.want, tc.paired, tc.baseBS)
			}
			if !(sp.Ratio.Lo <= sp.Ratio.Value && sp.Ratio.Value <= sp.Ratio.Hi) {
				t.Errorf("interval %g–%g does not hold %g", sp.Ratio.Lo, sp.Ratio.Hi, sp.Ratio.Value)
			}
			if tc.want > 1.5 && sp.Ratio.Decide(noise.MinGain) != noise.Better {
				t.Errorf("%s: want beyond noise", sp.Text())
			}
		})
	}
}

// Text says what a speedup is; a winner that is the baseline itself is
// "the baseline won", not an interval "(1–1)".
func TestSpeedupText(t *testing.T) {
	for _, tc := range []struct {
		sp   *Speedup
		want string
	}{
		{nil, "—"},
		{&Speedup{Baseline: "b", Ratio: noise.Ratio{Value: 2.31, Lo: 2.2, Hi: 2.43}}, "2.31× (2.2–2.43) over b"},
		{&Speedup{Baseline: "b", Ratio: noise.Ratio{Value: 1.02, Lo: 0.97, Hi: 1.07}}, "~1.02× (0.97–1.07) over b"},
		{&Speedup{Baseline: "b", Ratio: noise.Ratio{Value: 1, Lo: 1, Hi: 1}}, "1× (the baseline b won)"},
	} {
		if got := tc.sp.Text(); got != tc.want {
			t.Errorf("Text() = %q, want %q", got, tc.want)
		}
	}
}

func TestCheckBaseline(t *testing.T) {
	cs, _ := backend.ParseCandidates("ort:cpu:basic,ort:cpu:all")
	if err := CheckBaseline("ort:cpu:all", cs); err != nil {
		t.Error(err)
	}
	if err := CheckBaseline("", cs); err != nil {
		t.Error(err)
	}
	if err := CheckBaseline("ort:cpu:disabled", cs); err == nil {
		t.Error("a baseline that is no candidate passed")
	}
}

// A winner whose engine is the baseline's (byte-identical, measured once)
// has no speedup to state: no ratio, "identical engines (one measured)"
// (issue 30: it read "1× (the baseline … won)" for a baseline that lost).
func TestSpeedupOverAnIdenticalBaseline(t *testing.T) {
	basic := passed("ort:cpu:basic", st(8, 2))
	basic.SameEngineAs = "ort:cpu:disabled"
	results := []backend.CandidateResult{passed("ort:cpu:disabled", st(8, 2)), basic}
	sel := Selection{Index: 1, Candidate: "ort:cpu:basic", BatchSize: 8}
	sp := SpeedupOver(results, sel, "ort:cpu:disabled")
	if sp == nil || !sp.Identical {
		t.Fatalf("speedup %+v, want one marked identical", sp)
	}
	if got, want := sp.Text(), "none: identical engines (one measured) with the baseline ort:cpu:disabled"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if got := sp.Short(); strings.Contains(got, "×") {
		t.Errorf("Short = %q, want no ratio", got)
	}
	// The baseline itself winning is not an identical engine.
	if sp := SpeedupOver(results, Selection{Index: 0, Candidate: "ort:cpu:disabled", BatchSize: 8}, ""); sp == nil || sp.Identical {
		t.Errorf("the baseline's own speedup %+v", sp)
	}
}
