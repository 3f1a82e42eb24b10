package tuner_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/trt"
	"github.com/tunefleet/tunefleet/tuner"
)

// A candidate that builds and is correct but cannot be benchmarked still
// wins first-wins and one-backend, which do not select by speed (AITune
// accepts a candidate whose profiling fails); the profiling strategies
// need the measurement and reject it. trtexec is the stand-in, whose
// benchmark runs fail.
func TestBenchmarkFailureOnlyMattersToProfilingStrategies(t *testing.T) {
	b, samples := standInBundle(t)
	cfg := trtreplay.Working(t, trtreplay.GraphOutputs(t, b.Manifest.Graphs[0], b.Manifest.DynamicShapes, samples))
	cfg.Bench = trtreplay.Replay{Log: trtreplay.Fixture(t, trtreplay.LogPluginNotFound), Exit: 1}
	reg := standInRegistry(t, cfg)
	cand, _ := backend.ParseCandidates("trt:fp16")
	for _, tc := range []struct {
		strategy string
		wins     bool
	}{{strategy.FirstWins, true}, {strategy.OneBackend, true}, {strategy.MaxThroughput, false}} {
		t.Run(tc.strategy, func(t *testing.T) {
			strat, _ := strategy.Parse(tc.strategy, 0)
			res, err := tuner.TuneGraph(context.Background(), b, "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
				Backends: reg, Strategy: strat, Candidates: cand, StopRule: backend.DefaultStopRule(),
			})
			if err != nil {
				t.Fatal(err)
			}
			cr := res.Results[0]
			if res.OK() != tc.wins {
				t.Fatalf("winner %+v, failure %+v, want a winner: %v", res.Winner, res.Failure, tc.wins)
			}
			if tc.wins && (cr.Status != backend.StatusPassed || len(cr.Benchmarks) != 0 || !strings.Contains(cr.Info["benchmark_error"], "benchmark")) {
				t.Fatalf("candidate %+v: want passed, unmeasured, with the benchmark's error", cr)
			}
		})
	}
}

// AITune's min/max-shape check: an engine that fails at the graph's
// declared max batch (here trtexec has no answer for those inputs) fails
// the candidate, even though every recorded sample passed.
func TestEngineMustRunAtTheDeclaredMaxBatch(t *testing.T) {
	b, samples := standInBundle(t)                                                    // samples at batch 1 and 4, declared 1..8
	reg := standInRegistry(t, trtreplay.Working(t, trtreplay.SampleOutputs(samples))) // the recorded samples only
	cand, _ := backend.ParseCandidates("trt:fp16")
	strat, _ := strategy.Parse(strategy.FirstWins, 0)
	res, err := tuner.TuneGraph(context.Background(), b, "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
		Backends: reg, Strategy: strat, Candidates: cand, StopRule: backend.DefaultStopRule(),
	})
	if err != nil {
		t.Fatal(err)
	}
	cr := res.Results[0]
	if res.OK() || cr.Failure == nil || cr.Failure.Class != backend.FailRuntime || !strings.Contains(cr.Failure.Message, "at batch 8, the graph's declared max") || cr.CheckedAt != len(samples) {
		t.Fatalf("winner %+v, candidate %+v: want a runtime failure at batch 8 after %d samples passed", res.Winner, cr, len(samples))
	}
}

// standInBundle is bundletest's one-graph bundle and its samples, for the
// trtexec stand-in (skipped without its fixtures, failed under CI).
func standInBundle(t *testing.T) (*bundle.Bundle, []bundle.Sample) {
	t.Helper()
	trtreplay.FixtureDir(t)
	b, err := bundle.Open(bundletest.Write(t))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	return b, samples
}

// standInRegistry is a trt backend whose trtexec is this test binary as
// the stand-in configured by cfg.
func standInRegistry(t *testing.T, cfg trtreplay.Config) backend.Registry {
	t.Helper()
	env := trtreplay.WriteConfig(t, cfg)
	return backend.Registry{"trt": trt.New(trt.Options{Executable: trtreplay.Executable(t), Env: []string{env}})}
}
