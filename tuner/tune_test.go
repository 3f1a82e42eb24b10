package tuner_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// realBundle makes a bundle whose reference outputs come from ONNX Runtime
// (optimizations off), as `producer bundle from-onnx` does.
func realBundle(t *testing.T) string {
	t.Helper()
	needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(16, 32, 4).Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	_, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Ranges: []string{"input:1x16..8x16"}, Samples: 2, Seed: 7, IntHi: 9,
		Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// perturb adds delta to element 0 of a sample's first reference output.
func perturb(t *testing.T, dir, sample string, delta float32) {
	t.Helper()
	p := filepath.Join(dir, "graphs", "0", "samples", sample, "output_0.pb")
	ref, err := bundle.ReadTensorFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(ref.Data))
	binary.LittleEndian.PutUint32(ref.Data, math.Float32bits(v+delta))
	b, err := bundle.EncodeTensorProto(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWrongAnswerIsRecordedWithItsClass(t *testing.T) {
	dir := realBundle(t)
	perturb(t, dir, "1", 0.5)
	out := t.TempDir()
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", out, quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended"))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() {
		t.Fatalf("a perturbed reference produced winner %+v", r.Winner)
	}
	for _, c := range r.Results {
		if c.Status != backend.StatusFailed || c.Failure.Class != backend.FailWrongAnswer {
			t.Fatalf("%s: status %s failure %+v, want a wrong_answer failure", c.Candidate, c.Status, c.Failure)
		}
		for _, want := range []string{"graphs/0/samples/1", `output "output"`, "worst at [0 0]"} {
			if !strings.Contains(c.Failure.Message, want) {
				t.Errorf("%s: failure %q does not mention %q", c.Candidate, c.Failure.Message, want)
			}
		}
		if len(c.Benchmarks) != 0 {
			t.Errorf("%s: a wrong candidate was benchmarked", c.Candidate)
		}
	}
	if r.Failure == nil || r.Failure.Class != backend.FailWrongAnswer {
		t.Fatalf("graph failure %+v, want class wrong_answer", r.Failure)
	}
	saved, err := tuner.ReadResult(filepath.Join(out, tuner.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if saved.OK() || saved.Failure.Class != backend.FailWrongAnswer {
		t.Fatalf("result.json does not record the wrong answer: %+v", saved.Failure)
	}
}

func TestPerturbationWithinToleranceStillPasses(t *testing.T) {
	dir := realBundle(t)
	perturb(t, dir, "0", 1e-5) // below float32's default atol 1e-4
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), quickOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
}

func TestFirstWinsBuildsNothingAfterTheFirstPass(t *testing.T) {
	dir := realBundle(t)
	out := t.TempDir()
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", out, quickOptions(t, strategy.FirstWins, "ort:cpu:basic,ort:cpu:extended,ort:cpu:all"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Winner.Candidate != "ort:cpu:basic" {
		t.Fatalf("winner %+v, want ort:cpu:basic", r.Winner)
	}
	for _, c := range r.Results[1:] {
		if c.Status != backend.StatusSkipped || c.BuildTime != 0 || len(c.Artifacts) != 0 {
			t.Errorf("%s: %+v, want skipped without a build", c.Candidate, c)
		}
	}
	built, _ := filepath.Glob(filepath.Join(out, "candidates", "*"))
	if len(built) != 1 {
		t.Fatalf("candidate directories %v, want only the first", built)
	}
}

func TestResultRecordsEveryCandidateAndVerifiableEngine(t *testing.T) {
	dir := realBundle(t)
	out := t.TempDir()
	cands := "ort:cpu:disabled,ort:cpu:basic,ort:cpu:extended"
	opts := quickOptions(t, strategy.MaxThroughput, cands)
	opts.BatchSizes = nil // the default sweep, 1, 2, 4, … up to the profile's max batch
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", out, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
	if strings.Join(r.Candidates, ",") != cands || len(r.Results) != 3 {
		t.Fatalf("candidates %v results %d", r.Candidates, len(r.Results))
	}
	// The winner has the highest best throughput of all, or ties with the
	// candidate that has it (and is listed first of the tied).
	best, bestOf := 0.0, ""
	for _, c := range r.Results {
		if !c.Passed() || c.CheckedAt != 2 {
			t.Fatalf("%s: %+v", c.Candidate, c)
		}
		st, _ := c.BestThroughput(0)
		if st.Throughput > best {
			best, bestOf = st.Throughput, c.Candidate
		}
		for _, s := range c.Benchmarks {
			if s.BatchSize < 1 || s.BatchSize > 8 || s.Samples == 0 {
				t.Fatalf("%s: implausible benchmark %+v", c.Candidate, s)
			}
		}
	}
	won := r.Winner.Value == best || r.Winner.Decision == strategy.DecisionTie && r.Winner.Within(bestOf) && r.Winner.Tied[0] == r.Winner.Candidate
	if !won || r.Winner.Metric != strategy.MetricThroughput {
		t.Fatalf("winner %+v, best throughput %v", r.Winner, best)
	}
	if fmt.Sprint(r.BatchSizes) != "[1 2 4 8]" {
		t.Fatalf("batch sizes %v, want 1, 2, 4 and the max batch 8", r.BatchSizes)
	}
	sum, size, err := bundle.SHA256File(filepath.Join(out, r.Winner.Engine.Path))
	if err != nil || sum != r.Winner.Engine.SHA256 || size != r.Winner.Engine.Size {
		t.Fatalf("engine digest mismatch: %v %s %d vs %+v", err, sum, size, r.Winner.Engine)
	}
	if len(r.Inputs) != 1+2*2 || !strings.HasPrefix(r.BundleDigest, "sha256:") {
		t.Fatalf("inputs %v digest %s", r.Inputs, r.BundleDigest)
	}
}

func TestMinLatencyMeasuresBatchOneOnly(t *testing.T) {
	dir := realBundle(t)
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), quickOptions(t, strategy.MinLatency, "ort:cpu:basic,ort:cpu:extended"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Winner.Metric != strategy.MetricLatencyMs || r.Winner.BatchSize != 1 {
		t.Fatalf("winner %+v", r.Winner)
	}
	for _, c := range r.Results {
		if len(c.Benchmarks) != 1 || c.Benchmarks[0].BatchSize != 1 {
			t.Fatalf("%s: benchmarks %+v, want batch 1 only", c.Candidate, c.Benchmarks)
		}
	}
}

func TestLatencyBudgetNobodyMeets(t *testing.T) {
	dir := realBundle(t)
	opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic")
	s, err := strategy.Parse(strategy.LatencyBudget, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	opts.Strategy = s
	r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Failure == nil || !strings.Contains(r.Failure.Message, "latency budget") {
		t.Fatalf("winner %+v failure %+v, want no candidate within the budget", r.Winner, r.Failure)
	}
	// The sweep stops at the first batch size over budget.
	if n := len(r.Results[0].Benchmarks); n != 1 {
		t.Fatalf("%d batch sizes measured, want the sweep to stop after the first", n)
	}
}

func TestInvalidOptionsAreRejectedBeforeWork(t *testing.T) {
	needORT(t)
	for _, tc := range []struct{ cands, strat, want string }{
		{"foo:bar", strategy.FirstWins, `unknown backend "foo"`},
		{"ort:cpu:turbo", strategy.FirstWins, `unknown optimization level "turbo"`},
		{"ort:cuda", strategy.FirstWins, "not in this build"},
		{"ort:cpu:basic,ort:cpu:all", strategy.OneBackend, "exactly one"},
	} {
		t.Run(tc.cands, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := tuner.TuneGraph(context.Background(), nil, "0", out, quickOptions(t, tc.strat, tc.cands))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("output directory created for rejected options")
			}
		})
	}
}

// An output whose batch axis is a multiple of the input's (y[4N] from
// x[N,4]) is sized from the sample's ratio at every batch the tuner runs:
// the sweep and the min/max runs work for it.
func TestOutputBatchAxisScalesWithItsRatio(t *testing.T) {
	needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "flatten.onnx")
	b := onnxtest.New("flatten", 13)
	b.Input("x", onnxpb.TensorProto_FLOAT, "N", 4).Output("y", onnxpb.TensorProto_FLOAT, "M")
	b.Int64s("shape", []int64{1}, []int64{-1})
	b.Node("Reshape", []string{"x", "shape"}, []string{"y"})
	if err := b.Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Ranges: []string{"x:1x4..8x4"}, Samples: 2, Seed: 3, IntHi: 9, Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	strat, _ := strategy.Parse(strategy.MaxThroughput, 0)
	cands, _ := backend.ParseCandidates("ort:cpu:basic")
	rule := backend.DefaultStopRule()
	rule.MaxTime = 20 * time.Millisecond
	res, err := tuner.TuneGraph(context.Background(), open(t, out), "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Strategy: strat, Candidates: cands, StopRule: rule,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.Results[0].Benchmarks) != 4 {
		t.Fatalf("winner %+v, failure %+v, benchmarks %+v: want batch 1..8 measured", res.Winner, res.Failure, res.Results[0].Benchmarks)
	}
}
