package tuner

// Measurement: timing the candidates that passed their check in interleaved
// rounds per batch size, the batched inputs they run on, and the one-line
// summary of a measurement. Building and checking are in tuner.go.

import (
	"context"
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/strategy"
)

// measure benchmarks the open candidates. Identical engines (same engineID)
// are measured once, by the first of them, and share its figures; the
// groups of more than one are returned. Every batch size of the plan is
// measured in rounds interleaved between the candidates still sweeping
// (backend.Interleave), in an order shuffled by seed; an engine that
// measures in one go (backend.OneShot) is measured alone and its calls cut
// into rounds.
func (t *graphTuner) measure(ctx context.Context, open []*built, plan strategy.Plan, seed uint64) [][]string {
	var reps []*built
	byID := map[string]*built{}
	var groups [][]string
	groupOf := map[*built]int{}
	for _, b := range open {
		if r, ok := byID[b.id]; ok && b.id != "" {
			b.sameAs = r
			if _, ok := groupOf[r]; !ok {
				groupOf[r] = len(groups)
				groups = append(groups, []string{r.c.String()})
			}
			groups[groupOf[r]] = append(groups[groupOf[r]], b.c.String())
			t.logf("graph %s: %s: the same engine as %s (byte-identical): measured once", t.g.Name, b.c, r.c)
			continue
		}
		byID[b.id] = b
		reps = append(reps, b)
	}
	ends := make([]func(), len(reps))
	for i, b := range reps {
		ends[i] = b.steps.start(PhaseBenchmark)
	}
	t.sweep(ctx, reps, plan, seed)
	for i := range reps {
		ends[i]()
	}
	for _, b := range open {
		if b.sameAs != nil {
			b.bench, b.err = slices.Clone(b.sameAs.bench), b.sameAs.err
		}
	}
	return groups
}

// sweep measures the plan's batch sizes (or the recorded sample as is)
// for every representative, each batch size in interleaved rounds, until
// each candidate's sweep rule stops it.
func (t *graphTuner) sweep(ctx context.Context, reps []*built, plan strategy.Plan, seed uint64) {
	base := t.samples[0]
	type point struct {
		bs   int
		ins  []bundle.Tensor
		outs []backend.OutputSpec
	}
	var points []point
	if len(plan.BatchSizes) == 0 {
		bs := max(t.batchOf(base), 1)
		points = append(points, point{bs, base.Inputs, backend.OutputSpecsLike(base.Outputs)})
	} else {
		for _, bs := range plan.BatchSizes {
			points = append(points, point{bs: bs})
		}
	}
	sweeps := make([]*backend.SweepState, len(reps))
	for i := range reps {
		sweeps[i] = backend.NewSweepState(plan.Sweep)
	}
	rule := t.opts.StopRule
	for pi, p := range points {
		if p.ins == nil {
			ins, outs, err := t.batch(base, p.bs)
			if err != nil {
				for i, b := range reps {
					if b.err == nil && !sweeps[i].Done() {
						b.err = fmt.Errorf("batch size %d: %w", p.bs, err)
					}
				}
				return
			}
			p.ins, p.outs = ins, outs
		}
		var active []int
		for i, b := range reps {
			if b.err == nil && !sweeps[i].Done() {
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			return
		}
		var rounds, once []int
		for _, i := range active {
			if os, ok := reps[i].eng.(backend.OneShot); ok && os.MeasuresOnce() {
				once = append(once, i)
			} else {
				rounds = append(rounds, i)
			}
		}
		// Each candidate's observer hears the batch size once and its calls
		// counted over the rounds.
		heard := map[*built]context.Context{}
		counted := map[*built]int{}
		measureOne := func(ctx context.Context, b *built, r backend.StopRule) (backend.Stats, error) {
			if heard[b] == nil {
				heard[b] = b.steps.batch(ctx, p.bs)
			}
			bctx := heard[b]
			if progress := backend.CallProgressFrom(bctx); progress != nil {
				before := counted[b]
				bctx = backend.WithCallProgress(ctx, func(n int) { progress(before + n) })
				defer func() { progress(counted[b]) }()
			} else {
				bctx = ctx
			}
			bctx, cancel := context.WithTimeout(bctx, t.opts.CandidateTimeout)
			defer cancel()
			st, err := b.eng.Benchmark(bctx, p.bs, p.ins, p.outs, r)
			counted[b] += st.Samples
			return st, err
		}
		stats := map[int]backend.Stats{}
		if len(rounds) > 0 {
			got, errs, err := backend.Interleave(ctx, rule, seed+uint64(pi), len(rounds), func(ctx context.Context, k int, r backend.StopRule) (backend.Stats, error) {
				return measureOne(ctx, reps[rounds[k]], r)
			})
			if err != nil {
				for _, i := range rounds {
					reps[i].err = err
				}
				return
			}
			for k, i := range rounds {
				if errs[k] != nil {
					reps[i].err = fmt.Errorf("batch size %d: %w", p.bs, errs[k])
					continue
				}
				stats[i] = got[k].WithBatch(p.bs)
			}
		}
		for _, i := range once {
			st, err := measureOne(ctx, reps[i], rule)
			if err != nil {
				reps[i].err = fmt.Errorf("batch size %d: %w", p.bs, err)
				continue
			}
			stats[i] = backend.SplitRounds(st, rule.RoundCount())
		}
		for _, i := range active {
			st, ok := stats[i]
			if !ok {
				continue
			}
			reps[i].bench = append(reps[i].bench, st)
			sweeps[i].Add(st)
		}
	}
}

// batch makes inputs of batch size bs from a sample, and output specs whose
// shapes are known where every non-batch axis is static.
func (t *graphTuner) batch(s bundle.Sample, bs int) ([]bundle.Tensor, []backend.OutputSpec, error) {
	ins, err := bundle.ResizeBatch(s.Inputs, t.g.Inputs, bs)
	if err != nil {
		// A batch beyond bundle's size limits is the bundle's fault (its
		// declared or explicit max), not the machine's: no retry fixes it.
		return nil, nil, backend.Fail(backend.FailBuild, "batch", err)
	}
	// An output's shape is known in advance when its other axes are static
	// and each batch axis is a whole multiple of the sample's batch (y[4N]
	// from x[N,4] scales by 4); otherwise the backend sizes it.
	sampleBS := int64(t.batchOf(s))
	outs := make([]backend.OutputSpec, len(s.Outputs))
	for i, o := range s.Outputs {
		d := t.g.Outputs[i]
		outs[i] = backend.OutputSpec{Name: o.Name, DType: o.DType}
		shape := slices.Clone(o.Shape)
		known := len(shape) == len(d.Shape)
		for ax, a := range d.Shape {
			switch {
			case !known:
			case a.IsBatch() && sampleBS > 0 && shape[ax]%sampleBS == 0:
				shape[ax] = shape[ax] / sampleBS * int64(bs)
			case !a.IsStatic():
				known = false
			}
		}
		if !known && (o.DType == bundle.Float16 || o.DType == bundle.BFloat16) {
			// ONNX Runtime cannot allocate these for us (see ort's
			// newOutput): assume the other dynamic axes keep their
			// recorded size, as they do when only the batch changes. A
			// wrong guess fails the run with ORT's shape error.
			shape = slices.Clone(o.Shape)
			for ax, a := range d.Shape {
				if a.IsBatch() && ax < len(shape) && sampleBS > 0 && shape[ax]%sampleBS == 0 {
					shape[ax] = shape[ax] / sampleBS * int64(bs)
				}
			}
			known = len(shape) == len(d.Shape)
		}
		if known {
			outs[i].Shape = shape
		}
	}
	return ins, outs, nil
}

func summary(bs []backend.Stats) string {
	best := backend.Stats{}
	for _, s := range bs {
		if s.Throughput > best.Throughput {
			best = s
		}
	}
	// Marked as the tables mark it (history.Unstable), with the cause: a
	// figure from an unstable measurement may move run to run.
	mark, unstable := "", ""
	if len(bs) > 0 && !best.Stable {
		mark, unstable = "~", ", unstable: "+best.Cause()
	}
	extra := ""
	if best.Outliers > 0 {
		extra += fmt.Sprintf(", %d outlier call(s) dropped", best.Outliers)
	}
	if best.Short {
		extra += fmt.Sprintf(", measured from %d calls", best.Samples)
	}
	return fmt.Sprintf("best %s%s samples/s at batch %d (p50 %s ms, cv %.3f, %d calls in %d rounds%s%s)", backend.Human(best.Throughput), mark, best.BatchSize,
		backend.Human(best.P50Ms), best.CV, best.Samples, max(len(best.RoundMs), 1), extra, unstable)
}
