package tuner_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// A manifest that asks for a batch no machine can hold (a worker reads it
// back from shared storage, so Open's bounds may not have run on it) fails
// its candidates as bad input, class build, which the queue does not
// retry, instead of killing the worker (2^40: fatal out of memory; 10^15
// and 2^63-1: a panic in ResizeAxis, retried as infrastructure).
func TestPoisonBatchFailsTheGraphAsBuild(t *testing.T) {
	dir := realBundle(t) // input[N,16], N in 1..8
	for _, max := range []int64{1 << 31, 1 << 40, 1e15, math.MaxInt64} {
		b := open(t, dir)
		// Past Open, as a forged run.json would be.
		b.Manifest.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 1, Max: max, Batch: true}, {Size: 16}}}
		strat, _ := strategy.Parse(strategy.MaxThroughput, 0)
		cands, _ := backend.ParseCandidates("ort:cpu:basic")
		rule := backend.DefaultStopRule()
		rule.MaxTime = 20 * time.Millisecond
		res, err := tuner.TuneGraph(context.Background(), b, "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
			Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Strategy: strat, Candidates: cands, StopRule: rule,
		})
		if max > shapes.MaxDim {
			// Beyond any dim: refused before any candidate runs, as bad input.
			if err == nil || backend.ClassOf(err, backend.FailInfrastructure) != backend.FailBuild || !strings.Contains(err.Error(), "limit") {
				t.Errorf("batch max %d: err %v (class %s), want a build failure naming the limit", max, err, backend.ClassOf(err, backend.FailInfrastructure))
			}
			continue
		}
		if err != nil {
			t.Fatalf("batch max %d: %v", max, err)
		}
		if res.OK() || res.Failure == nil {
			t.Fatalf("batch max %d: the graph has a winner", max)
		}
		if res.Failure.Class != backend.FailBuild || res.Failure.Class.Retryable() {
			t.Errorf("batch max %d: graph failure class %q (%s), want build", max, res.Failure.Class, res.Failure.Message)
		}
		cr := res.Results[0]
		if cr.Failure == nil || cr.Failure.Class != backend.FailBuild || !strings.Contains(cr.Failure.Message, "limit") {
			t.Errorf("batch max %d: candidate failure %+v, want class build naming the limit", max, cr.Failure)
		}
	}
}
