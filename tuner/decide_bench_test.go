package tuner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
)

// decisions is how many decisions each of the A/A and A/B benchmarks takes.
const decisions = 100

// BenchmarkDecisionsAA and BenchmarkDecisionsAB measure the noise rule
// itself (issue 19) on this machine, as a tuning would: two real ONNX
// Runtime engines, measured in interleaved rounds (backend.Interleave, a
// 200 ms bench time in 10 rounds) and decided by max-throughput's Select.
//
// A/A: the same model and settings built twice, as two engines (two
// sessions, so not merged as identical engines): every decision should be
// a tie. A/B: the same model on a 141-wide instead of 128-wide square (its
// MatMul does 1.34× the work): the faster should win beyond noise.
//
// The squares are small enough that a call (≈0.2 ms, 64 KB matrices) is
// compute-bound and a 20 ms round holds about a hundred calls, as real
// models' rounds do; at 256 wide a call took ≈13 ms, so a round held one
// or two calls and a single preemption decided it.
func BenchmarkDecisionsAA(b *testing.B) {
	benchDecisions(b, 128, 128, func(d decision) bool { return d.tie }, "ties")
}

func BenchmarkDecisionsAB(b *testing.B) {
	benchDecisions(b, 141, 128, func(d decision) bool { return !d.tie && d.winner == 1 }, "detected")
}

type decision struct {
	tie    bool
	winner int
	ratio  float64
}

func benchDecisions(b *testing.B, nA, nB int, good func(decision) bool, what string) {
	needORT(b)
	ctx := context.Background()
	engA := slowEngine(b, nA)
	engB := slowEngine(b, nB)
	rule := backend.DefaultStopRule()
	rule.MaxTime = 200 * time.Millisecond
	strat, err := strategy.Parse(strategy.MaxThroughput, 0)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ok, ties := 0, 0
		sum := 0.0
		for i := range decisions {
			d := decide(b, ctx, strat, rule, uint64(i+1), engA, engB)
			if good(d) {
				ok++
			}
			if d.tie {
				ties++
			}
			sum += d.ratio
		}
		b.ReportMetric(float64(ok), what+"/100")
		b.ReportMetric(sum/decisions, "mean-ratio")
		fmt.Printf("%s: %d×%d vs %d×%d: %d of %d decisions %s (%d ties); mean measured ratio B/A per sample %.3f\n",
			b.Name(), nA, nA, nB, nB, ok, decisions, what, ties, sum/decisions)
	}
}

// decide measures a and b in interleaved rounds and selects as
// max-throughput does.
func decide(b *testing.B, ctx context.Context, strat strategy.Strategy, rule backend.StopRule, seed uint64, engs ...benchEngine) decision {
	stats, errs, err := backend.Interleave(ctx, rule, seed, len(engs), func(ctx context.Context, i int, r backend.StopRule) (backend.Stats, error) {
		e := engs[i]
		return e.eng.Benchmark(ctx, 1, e.sample.Inputs, backend.OutputSpecsLike(e.sample.Outputs), r)
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		b.Fatal(err, errs)
	}
	results := []backend.CandidateResult{
		{Candidate: "a", Status: backend.StatusPassed, Benchmarks: []backend.Stats{stats[0].WithBatch(1)}},
		{Candidate: "b", Status: backend.StatusPassed, Benchmarks: []backend.Stats{stats[1].WithBatch(1)}},
	}
	sel, err := strat.Select(results)
	if err != nil {
		b.Fatal(err)
	}
	if testing.Verbose() && sel.Margin != nil {
		fmt.Printf("  decision %d: %s %s margin %.3f [%.3f, %.3f] rounds %d outliers %d/%d\n", seed, sel.Candidate, sel.Decision, sel.Margin.Value, sel.Margin.Lo, sel.Margin.Hi, sel.Margin.Rounds, stats[0].Outliers, stats[1].Outliers)
	}
	return decision{tie: sel.Decision == strategy.DecisionTie, winner: sel.Index, ratio: stats[0].EstimateMs / stats[1].EstimateMs}
}

type benchEngine struct {
	eng    backend.Engine
	sample bundle.Sample
}

// slowEngine builds onnxtest.Slow(n) with ONNX Runtime (one thread, all
// optimizations).
func slowEngine(b *testing.B, n int) benchEngine {
	dir := b.TempDir()
	model := filepath.Join(dir, "m.onnx")
	if err := onnxtest.Slow(n).Write(model); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	be := ort.New(ort.Options{})
	bd, err := bundlegen.FromONNX(ctx, model, filepath.Join(dir, "bundle"), bundlegen.ONNXOptions{Samples: 1, Seed: 1, Reference: be, WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	g, _ := bd.Manifest.Graph("0")
	samples, err := bd.Samples("0")
	if err != nil {
		b.Fatal(err)
	}
	onnxPath, err := bundle.Resolve(bd.Dir, g.ONNX)
	if err != nil {
		b.Fatal(err)
	}
	onnxPath, _ = filepath.Abs(onnxPath)
	profile, err := shapes.DeriveProfile(bundle.Specs(g.Inputs), nil)
	if err != nil {
		b.Fatal(err)
	}
	c, _ := backend.ParseCandidate("ort:cpu:all")
	eng, err := be.Build(ctx, backend.BuildRequest{Model: "m", Graph: g, ONNXPath: onnxPath, Profile: profile, Candidate: c, WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	return benchEngine{eng: eng, sample: samples[0]}
}
