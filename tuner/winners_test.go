package tuner_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Candidates whose engines are byte-identical and run with the same
// settings (spin=off is the default: the same session, named twice) are
// one engine: measured once, reported together, and the tie-break picks
// the first listed (issue 19).
func TestIdenticalEnginesAreMeasuredOnce(t *testing.T) {
	dir := realBundle(t)
	opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:basic:spin=off")
	rec := &recorder{}
	opts.Observe = rec.observe
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
	want := [][]string{{"ort:cpu:basic", "ort:cpu:basic:spin=off"}}
	if !reflect.DeepEqual(r.IdenticalEngines, want) || r.Results[1].SameEngineAs != "ort:cpu:basic" {
		t.Fatalf("identical engines %v, second same as %q; want %v", r.IdenticalEngines, r.Results[1].SameEngineAs, want)
	}
	if r.Results[0].Artifacts[0].SHA256 != r.Results[1].Artifacts[0].SHA256 {
		t.Fatal("the engines differ")
	}
	for _, s := range rec.steps {
		if s.Candidate == "ort:cpu:basic:spin=off" && s.BatchSize != 0 {
			t.Fatalf("the identical engine was benchmarked: %+v", s)
		}
	}
	if !reflect.DeepEqual(r.Results[0].Benchmarks, r.Results[1].Benchmarks) {
		t.Error("identical engines report different figures")
	}
	// One engine measured once has no ratio to state (issue 30: it read
	// "a tie within noise … (1.000×, 1.000–1.000)", as if measured twice).
	w := r.Winner
	if w.Candidate != "ort:cpu:basic" || w.Decision != strategy.DecisionTie || w.TieBreak != strategy.TieBreakOrder ||
		w.Margin != nil || w.RunnerUp != "" || !reflect.DeepEqual(w.Identical, []string{"ort:cpu:basic:spin=off"}) {
		t.Errorf("winner %+v margin %+v, want ort:cpu:basic by tie-break among identical engines, with no margin", w.Selection, w.Margin)
	}
	if !strings.Contains(w.Reason, "identical engines (one measured): ort:cpu:basic:spin=off") || strings.Contains(w.Reason, "×") {
		t.Errorf("reason %q: want identical engines (one measured), and no ratio", w.Reason)
	}
}

// Warm-up is bounded by time, not only by calls, on a model whose calls
// take most of a second: 10 warm-up calls would take seconds; with a
// warm-up of 100 ms there is one. The measurement then has its minimum
// of calls, past --bench-time, or says it could not (issue 19: 7 min 45 s
// of warm-up for two candidates, then one timed call each).
func TestWarmupIsBoundedOnASlowModel(t *testing.T) {
	needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "slow.onnx")
	if err := onnxtest.Slow(2560).Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Samples: 1, Seed: 3, Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:disabled")
	opts.StopRule.Warmup, opts.StopRule.WarmupTime = 10, 100*time.Millisecond
	opts.StopRule.MaxTime, opts.StopRule.MinCalls = 100*time.Millisecond, 3
	opts.StopRule.CapTime = 150 * time.Millisecond // too short for 3 calls: it must say so
	began := time.Now()
	r, err := tuner.TuneGraph(context.Background(), open(t, out), "0", t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
	st := r.Results[0].Benchmarks[0]
	t.Logf("one call takes %.0f ms; tuning took %s", st.MeanMs, took.Round(time.Millisecond))
	if st.MeanMs < 50 {
		t.Fatalf("a call takes %.1f ms: the model is not slow enough to test anything", st.MeanMs)
	}
	if st.WarmupCalls != 1 {
		t.Errorf("%d warm-up calls, want 1 (bounded by 100 ms)", st.WarmupCalls)
	}
	if st.Samples >= 3 || !st.Short || st.Stable || st.StopReason != backend.StopTimeCap {
		t.Errorf("measurement %+v: want short of its 3 calls, stopped by the cap, not stable", st)
	}
}

// Re-running the same bundle on a model with two candidates within noise
// (a second inter-op thread, which sequential execution never uses: a
// different session, the same speed) gives the same winner: a tie, broken
// by candidate order (issue 19: winners flipped between two runs of one
// bundle for 4 of 11 models). Every run that ties must name the first
// listed, and at least four runs of five must tie.
//
// Not all five: two sessions of one engine can differ for the whole of a
// measurement (where a session's buffers land is a property of the
// session, which rounds cannot average out; docs/measurement.md), and
// under load the decision benchmark's A/A reads 94–96 ties of 100. CI
// saw it here: one run of three at 1.25× (1.150–1.363) under the race
// detector's load, with this compute-bound model (128 KB of weights, in
// any core's L2, hundreds of calls a round), which had tied 12 of 12 runs
// at load average 26. A run that picks the other candidate by the
// tie-break, or a rule that never ties, still fails.
func TestTiesGiveTheSameWinnerEveryRun(t *testing.T) {
	needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(64, 256, 64).Write(model); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), model, bdir, bundlegen.ONNXOptions{
		Ranges: []string{"input:1x64..8x64"}, Samples: 1, Seed: 7,
		Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	ties := 0
	for run := range 5 {
		opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:basic:inter=2")
		opts.BatchSizes = []int{8}
		opts.StopRule.MaxTime, opts.StopRule.MaxSamples = 600*time.Millisecond, 2000
		dir := bdir
		r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("run %d: no winner: %+v", run, r.Failure)
		}
		t.Logf("run %d: %s (%s)", run, r.Winner.Candidate, r.Winner.Reason)
		if len(r.IdenticalEngines) != 0 {
			t.Fatalf("run %d: the candidates were taken for one engine: %v", run, r.IdenticalEngines)
		}
		if r.Winner.Decision == strategy.DecisionTie {
			ties++
			if r.Winner.Candidate != "ort:cpu:basic" {
				t.Errorf("run %d: a tie won by %s, want ort:cpu:basic (the first listed)", run, r.Winner.Candidate)
			}
		}
	}
	if ties < 4 {
		t.Errorf("%d of 5 runs tied, want at least 4: two sessions of one engine read as different engines", ties)
	}
}
