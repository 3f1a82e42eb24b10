package tuner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
)

// Options configure the tuning of a graph spec.
type Options struct {
	Backends   backend.Registry
	Strategy   strategy.Strategy
	Candidates []backend.Candidate
	// StopRule for each benchmark; zero means backend.DefaultStopRule().
	StopRule backend.StopRule
	// BatchSizes the sweep may use; nil means shapes.DefaultBatchSizes().
	BatchSizes []int
	// CandidateTimeout bounds build, check and benchmark of one candidate;
	// zero means 30 minutes.
	CandidateTimeout time.Duration
	// Progress, if set, receives one line per step.
	Progress io.Writer
	// Env is passed to every build (e.g. the GPU this task is pinned to).
	Env []string
	// BundleDigest, when the caller knows it (a queue task has it in
	// run.json; `worker tune` computes it once for all graphs), saves
	// hashing the whole bundle again for every graph.
	BundleDigest string
	// Known holds, by candidate, results known without building: the
	// worker's negative cache of deterministic failures. Such a candidate
	// is not built; its known result (with SkipReason set) stands in.
	Known map[string]backend.CandidateResult
	// Observe, if set, hears every phase of every candidate as it starts
	// and ends, and the calls of each benchmark as they are timed (a
	// terminal's progress line, a worker's phase metrics).
	Observe Observer
	// NoCalls: Observe has no use for the timed calls counted so far
	// (a worker's metrics), so the benchmark is not asked to report them:
	// ONNX Runtime's session child would send a message every 250 ms
	// beside the timed loop.
	NoCalls bool
}

// Validate checks options before any work: every candidate must belong to a
// known backend that accepts its options, and the strategy must accept the
// list. These are the user's mistakes, reported before anything runs.
func (o Options) Validate() error {
	if o.Strategy == nil {
		return fmt.Errorf("no strategy")
	}
	if len(o.Candidates) == 0 {
		return fmt.Errorf("no candidates")
	}
	for _, c := range o.Candidates {
		b, err := o.Backends.Lookup(c)
		if err != nil {
			return err
		}
		if err := b.Validate(c); err != nil {
			return err
		}
	}
	return o.Strategy.CheckCandidates(o.Candidates)
}

func (o Options) withDefaults() Options {
	if o.StopRule == (backend.StopRule{}) {
		o.StopRule = backend.DefaultStopRule()
	}
	if o.BatchSizes == nil {
		o.BatchSizes = shapes.DefaultBatchSizes()
	}
	if o.CandidateTimeout == 0 {
		o.CandidateTimeout = 30 * time.Minute
	}
	return o
}

// TuneGraph tunes one graph spec of b and writes its engines and
// result.json under outDir. The returned error is for failures of tuning
// itself (unreadable bundle, unwritable outDir, cancelled context); a graph
// whose candidates all fail is a Result without a winner, not an error.
func TuneGraph(ctx context.Context, b *bundle.Bundle, graph, outDir string, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	g, ok := b.Manifest.Graph(graph)
	if !ok {
		return nil, fmt.Errorf("bundle %s has no graph %q", b.Dir, graph)
	}
	samples, err := b.Samples(graph)
	if err != nil {
		return nil, err
	}
	inputs, err := b.GraphFiles(graph)
	if err != nil {
		return nil, err
	}
	digest := opts.BundleDigest
	if digest == "" {
		if digest, err = b.Digest(); err != nil {
			return nil, err
		}
	}
	profile, err := shapes.DeriveProfile(bundle.Specs(g.Inputs), relevant(b.Manifest.DynamicShapes, g))
	if err != nil {
		// The bundle's own declaration is wrong (a bound beyond the limits,
		// say): bad input, which no retry fixes.
		return nil, backend.Fail(backend.FailBuild, "profile", fmt.Errorf("graph %q: %w", graph, err))
	}
	onnxPath, err := bundle.Resolve(b.Dir, g.ONNX)
	if err != nil {
		return nil, err
	}
	if onnxPath, err = filepath.Abs(onnxPath); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	res := &Result{
		Format: ResultFormat, Model: b.Manifest.Model, Graph: graph, BundleDigest: digest, Inputs: inputs,
		Strategy: opts.Strategy.Name(), LatencyBudgetMs: opts.Strategy.LatencyBudgetMs(),
		Profile:    profile,
		BatchSizes: shapes.BatchSizes(bundle.Specs(g.Inputs), b.Manifest.DynamicShapes, opts.BatchSizes),
		StopRule:   opts.StopRule,
		StartedAt:  time.Now().UTC(),
	}
	if len(res.BatchSizes) == 0 {
		res.NoSweep = shapes.NoSweepReason(bundle.Specs(g.Inputs), b.Manifest.DynamicShapes)
	}
	for _, c := range opts.Candidates {
		res.Candidates = append(res.Candidates, c.String())
	}
	t := &graphTuner{opts: opts, g: g, samples: samples, profile: profile, onnxPath: onnxPath, outDir: outDir, model: b.Manifest.Model,
		explicit: b.Manifest.DynamicShapes}
	if res.NoSweep != "" {
		t.logf("graph %s: no batch sweep: %s", graph, res.NoSweep)
	}
	for i, c := range opts.Candidates {
		if opts.Strategy.Done(res.Results) {
			res.Results = append(res.Results, backend.CandidateResult{Candidate: c.String(), Status: backend.StatusSkipped})
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if known, ok := opts.Known[c.String()]; ok {
			known.Candidate = c.String()
			t.logf("graph %s: %s: not built: %s", graph, c, known.SkipReason)
			res.Results = append(res.Results, known)
			continue
		}
		cr := t.protected(ctx, i, c, opts.Strategy.Plan(res.BatchSizes))
		res.Results = append(res.Results, cr)
		if err := ctx.Err(); err != nil {
			return nil, err // cancelled while this candidate ran: its failure is not its own
		}
	}
	sel, err := opts.Strategy.Select(res.Results)
	if err != nil {
		res.Failure = backend.InfoOf(err, backend.FailBuild)
		t.logf("graph %s: no winner: %v", graph, err)
	} else {
		w := &Winner{Selection: sel}
		for _, a := range res.Results[sel.Index].Artifacts {
			switch a.Role {
			case "engine":
				if w.Engine == nil {
					w.Engine = &a
				}
			case backend.RoleEngineData:
				w.EngineData = append(w.EngineData, a)
			}
		}
		res.Winner = w
		t.logf("graph %s: winner %s (%s)", graph, sel.Candidate, sel.Reason)
	}
	res.Duration = time.Since(res.StartedAt)
	if err := writeJSON(filepath.Join(outDir, ResultFile), res); err != nil {
		return nil, fmt.Errorf("write result: %w", err)
	}
	return res, nil
}

// relevant keeps the dynamic shapes that name this graph's inputs.
func relevant(ds shapes.DynamicShapes, g bundle.Graph) shapes.DynamicShapes {
	out := shapes.DynamicShapes{}
	for _, in := range g.Inputs {
		if d, ok := ds[in.Name]; ok {
			out[in.Name] = d
		}
	}
	return out
}

type graphTuner struct {
	opts     Options
	model    string
	g        bundle.Graph
	samples  []bundle.Sample
	profile  shapes.Profile
	onnxPath string
	outDir   string
	explicit shapes.DynamicShapes // the bundle's dynamic_shapes
}

func (t *graphTuner) logf(format string, args ...any) {
	if t.opts.Progress != nil {
		fmt.Fprintf(t.opts.Progress, format+"\n", args...)
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._=-]+`)

// candidate builds, checks and benchmarks one candidate.
func (t *graphTuner) candidate(ctx context.Context, idx int, c backend.Candidate, plan strategy.Plan) backend.CandidateResult {
	cr := backend.CandidateResult{Candidate: c.String()}
	fail := func(err error, fallback backend.FailureClass) backend.CandidateResult {
		cr.Status = backend.StatusFailed
		cr.Failure = backend.InfoOf(err, fallback)
		t.logf("graph %s: %s: failed (%s): %s", t.g.Name, c, cr.Failure.Class, cr.Failure.Message)
		return cr
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.CandidateTimeout)
	defer cancel()
	be, err := t.opts.Backends.Lookup(c)
	if err != nil {
		return fail(err, backend.FailBuild)
	}
	rel := filepath.Join("candidates", fmt.Sprintf("%d-%s", idx, unsafeChars.ReplaceAllString(c.String(), "_")))
	work := filepath.Join(t.outDir, rel)
	if err := os.RemoveAll(work); err != nil {
		return fail(backend.Fail(backend.FailInfrastructure, "build", err), backend.FailInfrastructure)
	}
	steps := t.stepper(idx, c)
	endBuild := steps.start(PhaseBuild)
	start := time.Now()
	eng, err := be.Build(ctx, backend.BuildRequest{Model: t.model, Graph: t.g, ONNXPath: t.onnxPath, Profile: t.profile, Candidate: c, WorkDir: work, Env: t.opts.Env})
	cr.BuildTime = time.Since(start)
	endBuild()
	if err != nil {
		cr.Artifacts = t.refs(work)
		return fail(err, backend.FailBuild)
	}
	cr.Info = eng.Info()
	// The engine's files are digested only once it is closed: a backend
	// may still be writing its log (the ONNX Runtime child's stderr) until
	// then, and the digest must be of the file as it is uploaded.
	closed := false
	closeAndRef := func() {
		if !closed {
			eng.Close()
			closed = true
		}
		cr.Artifacts = t.refs(work, eng.Artifacts()...)
	}
	defer func() {
		if !closed {
			eng.Close()
		}
	}()
	endCheck := steps.start(PhaseCheck)
	err = t.check(ctx, eng, &cr)
	endCheck()
	if err != nil {
		closeAndRef()
		return fail(err, backend.FailRuntime)
	}
	endBench := steps.start(PhaseBenchmark)
	cr.Benchmarks, err = t.benchmark(ctx, eng, plan, steps)
	endBench()
	closeAndRef()
	if err != nil && plan.ForTheRecord && ctx.Err() == nil {
		// The strategy does not select by speed: the candidate built and
		// is correct, so it qualifies; the result says why it has no
		// measurements.
		if cr.Info == nil {
			cr.Info = map[string]string{}
		}
		cr.Info["benchmark_error"] = err.Error()
		t.logf("graph %s: %s: benchmark failed (not needed by %s): %v", t.g.Name, c, t.opts.Strategy.Name(), err)
		err = nil
	}
	if err != nil {
		return fail(err, backend.FailRuntime)
	}
	cr.Status = backend.StatusPassed
	t.logf("graph %s: %s: built in %s, correct on %d sample(s), %s", t.g.Name, c, cr.BuildTime.Round(time.Millisecond), cr.CheckedAt, summary(cr.Benchmarks))
	return cr
}

// benchmark measures the first sample, batched to each of the plan's batch
// sizes (AITune profiles data[0] only), or as recorded when the plan has
// none: then at the sample's own batch (a batch-4 sample is measured, and
// its throughput counted, at batch 4), or 1 when it has no batch axis.
func (t *graphTuner) benchmark(ctx context.Context, eng backend.Engine, plan strategy.Plan, steps stepper) ([]backend.Stats, error) {
	base := t.samples[0]
	if len(plan.BatchSizes) == 0 {
		bs := max(t.batchOf(base), 1)
		st, err := eng.Benchmark(steps.batch(ctx, bs), bs, base.Inputs, backend.OutputSpecsLike(base.Outputs), t.opts.StopRule)
		if err != nil {
			return nil, err
		}
		return []backend.Stats{st}, nil
	}
	return backend.Sweep(ctx, plan.BatchSizes, plan.Sweep, func(ctx context.Context, bs int) (backend.Stats, error) {
		ins, outs, err := t.batch(base, bs)
		if err != nil {
			return backend.Stats{}, err
		}
		return eng.Benchmark(steps.batch(ctx, bs), bs, ins, outs, t.opts.StopRule)
	})
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

// refs digests the files a candidate left in its work directory; paths are
// relative to the output directory.
func (t *graphTuner) refs(work string, arts ...backend.Artifact) []backend.FileRef {
	var out []backend.FileRef
	for _, a := range arts {
		sum, size, err := bundle.SHA256File(a.Path)
		if err != nil {
			continue // an artifact the build did not get to write
		}
		rel, err := filepath.Rel(t.outDir, a.Path)
		if err != nil {
			rel = a.Path
		}
		out = append(out, backend.FileRef{Role: a.Role, Path: filepath.ToSlash(rel), SHA256: sum, Size: size})
	}
	if len(arts) == 0 {
		// Build failed: keep what it logged.
		entries, _ := os.ReadDir(work)
		for _, e := range entries {
			if e.Type().IsRegular() {
				p := filepath.Join(work, e.Name())
				if sum, size, err := bundle.SHA256File(p); err == nil {
					rel, _ := filepath.Rel(t.outDir, p)
					out = append(out, backend.FileRef{Role: "log", Path: filepath.ToSlash(rel), SHA256: sum, Size: size})
				}
			}
		}
	}
	return out
}

func summary(bs []backend.Stats) string {
	best := backend.Stats{}
	for _, s := range bs {
		if s.Throughput > best.Throughput {
			best = s
		}
	}
	// Marked as the tables mark it (history.Unstable): a figure whose stop
	// rule never saw a stable window may move run to run.
	mark, unstable := "", ""
	if len(bs) > 0 && !best.Stable {
		mark, unstable = "~", ", unstable"
	}
	return fmt.Sprintf("best %.0f%s samples/s at batch %d (p50 %.3f ms, cv %.3f%s)", best.Throughput, mark, best.BatchSize, best.P50Ms, best.CV, unstable)
}
