package tuner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/shapes"
)

// findMaxBatch is AITune's find-max-batch-size step (package maxbatch),
// run before any candidate is built: the neutral engine is measured over
// the batch sizes from the graph's min on until its throughput saturates,
// and t.g's inputs are extended to the batch of the highest throughput.
// Everything after (profile, sweep, bounds check, result, checkpoint)
// follows the extended graph. A graph without a batch axis is left as
// recorded (AITune's make_batch has nothing to resize there). An error is
// a failure of the step, which fails the graph as AITune's tune does.
func (t *graphTuner) findMaxBatch(ctx context.Context) (*maxbatch.Report, error) {
	start := time.Now()
	specs := bundle.Specs(t.g.Inputs)
	rep := &maxbatch.Report{Engine: maxbatch.NeutralCandidate, RecordedMax: shapes.MaxBatchSize(specs, nil)}
	defer func() { rep.Duration = time.Since(start) }()
	if !shapes.AnyBatchAxis(specs) || len(t.samples) == 0 {
		rep.Skipped = "no input has a batch axis: AITune's update_max_batch_size leaves such a graph as recorded (its make_batch has no axis to resize)"
		t.logf("graph %s: find max batch size: skipped: %s", t.g.Name, rep.Skipped)
		return rep, nil
	}
	cand, err := backend.ParseCandidate(maxbatch.NeutralCandidate)
	if err != nil {
		return nil, err
	}
	be, err := t.opts.Backends.Lookup(cand)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.CandidateTimeout)
	defer cancel()
	work := filepath.Join(t.outDir, "find-max-batch")
	defer os.RemoveAll(work) // nothing of the neutral engine is a result
	eng, err := be.Build(ctx, backend.BuildRequest{Model: t.model, Graph: t.g, ONNXPath: t.onnxPath, Candidate: cand, WorkDir: work, Env: t.opts.Env})
	if err != nil {
		return nil, fmt.Errorf("build the neutral engine %s: %w", cand, err)
	}
	defer eng.Close()
	base := t.samples[0]
	sampleBS := t.batchOf(base)
	rule := maxbatch.StopRule(t.opts.StopRule)
	sizes := maxbatch.Sizes(t.opts.FindBatchSizes, shapes.MinBatchSize(specs, nil))
	points, best, stop, err := maxbatch.Search(ctx, sizes,
		func(bs int) error { return maxbatch.Fits(t.g, base, sampleBS, bs) },
		func(ctx context.Context, bs int) (backend.Stats, error) {
			ins, outs, err := t.batch(base, bs)
			if err != nil {
				return backend.Stats{}, err
			}
			return eng.Benchmark(ctx, bs, ins, outs, rule)
		})
	if err != nil {
		return nil, err
	}
	rep.Points, rep.Found, rep.Stop = points, best, stop
	ext := maxbatch.Extend(t.g.Inputs, best)
	for i := range ext {
		if !slices.Equal(ext[i].Max, t.g.Inputs[i].Max) {
			rep.Extended = true
		}
	}
	t.g.Inputs = ext
	verb := "kept the recorded max batch"
	if rep.Extended {
		verb = fmt.Sprintf("extended the max batch from %d", rep.RecordedMax)
	}
	t.logf("graph %s: find max batch size on %s: %d samples/s at batch %d, the highest over %d batch size(s) (%s); %s, in %s",
		t.g.Name, cand, int64(points[slices.IndexFunc(points, func(p maxbatch.Point) bool { return p.BatchSize == best })].Throughput),
		best, len(points), stop, verb, time.Since(start).Round(time.Millisecond))
	return rep, nil
}
