package tuner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// aituneStops is AITune's ThroughputSaturatedProfilingStopStrategy
// (min_throughput_gain_ratio 0.05, throughput_backoff_limit 2) written out
// from its source: whether profiling stops after each of these throughputs.
func aituneStops(throughputs []float64) []bool {
	var best []float64
	backoff := 0
	out := make([]bool, len(throughputs))
	for i, tp := range throughputs {
		saturated := len(best) > 0 && tp*(1-0.05) < best[0]
		if !saturated {
			best = []float64{tp}
		}
		if saturated {
			if backoff >= 2 {
				out[i] = true
				continue
			}
			backoff++
		} else {
			backoff = 0
		}
	}
	return out
}

// With --find-max-batch the tuner measures the neutral engine over 1, 2,
// 4, … until AITune's saturation rule stops it, takes the batch of the
// highest throughput, and extends the graph (recorded 1..8) to it: the
// profile's opt and max, the sweep and result.json follow; the result
// validates against its schema.
func TestFindMaxBatchExtendsTheRecordedRange(t *testing.T) {
	dir := realBundle(t) // input 1x16..8x16
	out := t.TempDir()
	opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic")
	opts.BatchSizes = nil
	opts.FindMaxBatch = true
	opts.FindBatchSizes = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	res, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", out, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep := res.FindMaxBatch
	if !res.OK() || rep == nil || rep.Skipped != "" || rep.Engine != "ort:cpu:disabled" || rep.RecordedMax != 8 {
		t.Fatalf("winner %+v, failure %+v, find_max_batch %+v", res.Winner, res.Failure, rep)
	}
	// The sizes measured are a prefix of 1, 2, 4, …; it ends where AITune's
	// rule stops or at the last size, and the found batch is the argmax.
	var tps []float64
	best := rep.Points[0]
	for i, p := range rep.Points {
		if p.BatchSize != opts.FindBatchSizes[i] {
			t.Fatalf("points %+v: not the sizes from 1 in order", rep.Points)
		}
		tps = append(tps, p.Throughput)
		if p.Throughput > best.Throughput {
			best = p
		}
	}
	stops := aituneStops(tps)
	for i, s := range stops[:len(stops)-1] {
		if s {
			t.Fatalf("the sweep went on after AITune would stop at batch %d: %+v", rep.Points[i].BatchSize, rep.Points)
		}
	}
	if !stops[len(stops)-1] && len(rep.Points) != len(opts.FindBatchSizes) {
		t.Fatalf("the sweep stopped at batch %d where AITune goes on (%s): %+v", rep.Points[len(rep.Points)-1].BatchSize, rep.Stop, rep.Points)
	}
	if res.FoundMaxBatch != best.BatchSize || rep.Found != best.BatchSize {
		t.Fatalf("found %d, the highest throughput is at batch %d: %+v", res.FoundMaxBatch, best.BatchSize, rep.Points)
	}
	wantMax := int64(max(8, res.FoundMaxBatch))
	ip := res.Profile.Inputs[0]
	if !slices.Equal(ip.Min, []int64{1, 16}) || !slices.Equal(ip.Opt, []int64{wantMax, 16}) || !slices.Equal(ip.Max, []int64{wantMax, 16}) {
		t.Errorf("profile %+v, want min 1x16, opt and max %dx16", ip, wantMax)
	}
	if rep.Extended != (wantMax > 8) || res.BatchSizes[len(res.BatchSizes)-1] != int(wantMax) {
		t.Errorf("extended %v, sweep %v: want it to end at %d", rep.Extended, res.BatchSizes, wantMax)
	}
	t.Logf("found max batch %d (%s) in %s: %+v", res.FoundMaxBatch, rep.Stop, rep.Duration, rep.Points)
	raw, err := os.ReadFile(filepath.Join(out, tuner.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.ValidateJSON(schemas.Result, "", raw); err != nil {
		t.Errorf("result.json does not validate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "find-max-batch")); !os.IsNotExist(err) {
		t.Errorf("the neutral engine's files are left in the output: %v", err)
	}
}

// A graph without a batch axis keeps its recorded range: the step says
// why it did not run, and nothing is measured.
func TestFindMaxBatchSkipsAGraphWithoutABatchAxis(t *testing.T) {
	dir := realBundle(t)
	raw, err := os.ReadFile(filepath.Join(dir, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Graphs[0].Inputs {
		in := &m.Graphs[0].Inputs[i]
		*in = bundle.TensorDecl{TensorSpec: shapes.SpecFromRange(in.Name, in.Min, in.Max, false), DType: in.DType}
	}
	data, _ := m.Marshal()
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := quickOptions(t, strategy.FirstWins, "ort:cpu:basic")
	opts.FindMaxBatch = true
	res, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep := res.FindMaxBatch; rep == nil || rep.Skipped == "" || len(rep.Points) != 0 || res.FoundMaxBatch != 0 {
		t.Fatalf("find_max_batch %+v, found %d: want skipped", rep, res.FoundMaxBatch)
	}
	if ip := res.Profile.Inputs[0]; !slices.Equal(ip.Max, []int64{8, 16}) {
		t.Errorf("profile %+v, want the recorded max 8x16", ip)
	}
}
