package tuner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
	// Seed orders the rounds of the interleaved measurement (recorded in
	// the result); zero picks one from the clock.
	Seed uint64
	// NoCalls: Observe has no use for the timed calls counted so far
	// (a worker's metrics), so the benchmark is not asked to report them:
	// ONNX Runtime's session child would send a message every 250 ms
	// beside the timed loop.
	NoCalls bool
	// FindMaxBatch runs AITune's find-max-batch-size step before any
	// candidate is built (package maxbatch): the graph's max batch is
	// extended to the batch of the highest throughput on a neutral engine,
	// and the profile, the sweep and the result follow it. Off by default.
	FindMaxBatch bool
	// FindBatchSizes are the sizes that step may try; nil means
	// shapes.DefaultBatchSizes() (AITune's 1, 2, 4, …, 2^20).
	FindBatchSizes []int
	// Baseline is the candidate the winner's speedup is measured against
	// (Selection.Speedup); "" means the least optimized candidate
	// (strategy.DefaultBaseline).
	Baseline string
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
	if err := strategy.CheckBaseline(o.Baseline, o.Candidates); err != nil {
		return err
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
	if o.FindBatchSizes == nil {
		o.FindBatchSizes = shapes.DefaultBatchSizes()
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
		Profile:   profile,
		StopRule:  opts.StopRule,
		StartedAt: time.Now().UTC(),
	}
	for _, c := range opts.Candidates {
		res.Candidates = append(res.Candidates, c.String())
	}
	t := &graphTuner{opts: opts, g: g, samples: samples, onnxPath: onnxPath, outDir: outDir, model: b.Manifest.Model,
		explicit: b.Manifest.DynamicShapes}
	if opts.FindMaxBatch {
		rep, err := t.findMaxBatch(ctx)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if err != nil {
			// AITune's tune fails when this step does: no candidate is
			// built on a range that was never established.
			res.Failure = backend.InfoOf(backend.Fail(backend.ClassOf(err, backend.FailBuild), "find max batch size", err), backend.FailBuild)
			t.logf("graph %s: find max batch size failed: %v", graph, err)
			res.Duration = time.Since(res.StartedAt)
			if err := writeJSON(filepath.Join(outDir, ResultFile), res); err != nil {
				return nil, fmt.Errorf("write result: %w", err)
			}
			return res, nil
		}
		res.FindMaxBatch = rep
		if rep.Skipped == "" {
			res.FoundMaxBatch = rep.Found
		}
		g = t.g
	}
	if profile, err = shapes.DeriveProfile(bundle.Specs(g.Inputs), relevant(b.Manifest.DynamicShapes, g)); err != nil {
		return nil, backend.Fail(backend.FailBuild, "profile", fmt.Errorf("graph %q: %w", graph, err))
	}
	t.profile = profile
	res.Profile = profile
	res.BatchSizes = shapes.BatchSizes(bundle.Specs(g.Inputs), b.Manifest.DynamicShapes, opts.BatchSizes)
	if len(res.BatchSizes) == 0 {
		res.NoSweep = shapes.NoSweepReason(bundle.Specs(g.Inputs), b.Manifest.DynamicShapes)
	}
	if res.NoSweep != "" {
		t.logf("graph %s: no batch sweep: %s", graph, res.NoSweep)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	res.Seed = seed
	plan := opts.Strategy.Plan(res.BatchSizes)
	// Candidates are built and checked one after the other; those that
	// pass stay open and are measured together, in interleaved rounds, so
	// that drift and a neighbour's load hit all of them alike.
	var open []*built
	defer func() {
		for _, b := range open {
			b.close()
		}
	}()
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
		b := t.protected(ctx, i, c)
		if err := ctx.Err(); err != nil {
			b.close()
			return nil, err // cancelled while this candidate ran: its failure is not its own
		}
		if b.eng != nil {
			b.index = len(res.Results)
			b.cr.Status = backend.StatusPassed // provisionally: a strategy's Done counts it
			open = append(open, b)
		}
		res.Results = append(res.Results, b.cr)
	}
	res.IdenticalEngines = t.measure(ctx, open, plan, seed)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, b := range open {
		b.close()
		res.Results[b.index] = t.finish(b, plan)
	}
	open = nil
	sel, err := opts.Strategy.Select(res.Results)
	if err != nil {
		res.Failure = backend.InfoOf(err, backend.FailBuild)
		t.logf("graph %s: no winner: %v", graph, err)
	} else {
		sel.Speedup = strategy.SpeedupOver(res.Results, sel, opts.Baseline)
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
		t.logf("graph %s: winner %s (%s); speedup %s", graph, sel.Candidate, sel.Reason, sel.Speedup.Text())
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

// built is a candidate that built and passed the correctness check: its
// engine stays open until every candidate has been measured.
type built struct {
	c      backend.Candidate
	cr     backend.CandidateResult
	eng    backend.Engine
	work   string
	steps  stepper
	index  int    // its place in the results
	id     string // what makes it the same engine as another ("" when unknown)
	closed bool
	bench  []backend.Stats
	err    error // its measurement's failure
	// sameAs is the candidate whose measurement this one shares (identical
	// engines are measured once).
	sameAs *built
}

func (b *built) close() {
	if b.eng != nil && !b.closed {
		b.eng.Close()
		b.closed = true
	}
}

// candidate builds and checks one candidate. A candidate that passes comes
// back with its engine open (eng set); a failed one with its result only.
func (t *graphTuner) candidate(ctx context.Context, idx int, c backend.Candidate) *built {
	b := &built{c: c, cr: backend.CandidateResult{Candidate: c.String()}}
	cr := &b.cr
	fail := func(err error, fallback backend.FailureClass) *built {
		cr.Status = backend.StatusFailed
		cr.Failure = backend.InfoOf(err, fallback)
		t.logf("graph %s: %s: failed (%s): %s", t.g.Name, c, cr.Failure.Class, cr.Failure.Message)
		return b
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.CandidateTimeout)
	defer cancel()
	be, err := t.opts.Backends.Lookup(c)
	if err != nil {
		return fail(err, backend.FailBuild)
	}
	rel := filepath.Join("candidates", fmt.Sprintf("%d-%s", idx, unsafeChars.ReplaceAllString(c.String(), "_")))
	work := filepath.Join(t.outDir, rel)
	b.work = work
	if err := os.RemoveAll(work); err != nil {
		return fail(backend.Fail(backend.FailInfrastructure, "build", err), backend.FailInfrastructure)
	}
	steps := t.stepper(idx, c)
	b.steps = steps
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
	endCheck := steps.start(PhaseCheck)
	err = t.check(ctx, eng, cr)
	endCheck()
	if err != nil {
		// The engine's files are digested only once it is closed: a
		// backend may still be writing its log (the ONNX Runtime child's
		// stderr) until then, and the digest must be of the file as it is
		// uploaded.
		eng.Close()
		cr.Artifacts = t.refs(work, eng.Artifacts()...)
		return fail(err, backend.FailRuntime)
	}
	b.eng = eng
	b.id = engineID(c, eng)
	return b
}

// engineID is what makes two candidates the same engine: the backend, the
// sha256 of the engine file (written by the build, not touched after) and
// the settings the engine runs with beyond it (backend.RunKeyer). Empty
// when the engine has no engine file.
func engineID(c backend.Candidate, eng backend.Engine) string {
	for _, a := range eng.Artifacts() {
		if a.Role != "engine" {
			continue
		}
		sum, _, err := bundle.SHA256File(a.Path)
		if err != nil {
			return ""
		}
		id := c.Backend + " " + sum
		if rk, ok := eng.(backend.RunKeyer); ok {
			id += " " + rk.RunKey()
		}
		return id
	}
	return ""
}

// finish closes a measured candidate and turns it into its result.
func (t *graphTuner) finish(b *built, plan strategy.Plan) backend.CandidateResult {
	b.close()
	cr := b.cr
	cr.Artifacts = t.refs(b.work, b.eng.Artifacts()...)
	cr.Benchmarks = b.bench
	if b.sameAs != nil {
		cr.SameEngineAs = b.sameAs.c.String()
	}
	err := b.err
	if err != nil && plan.ForTheRecord && !errors.Is(err, context.Canceled) {
		// The strategy does not select by speed: the candidate built and
		// is correct, so it qualifies; the result says why it has no
		// measurements.
		if cr.Info == nil {
			cr.Info = map[string]string{}
		}
		cr.Info["benchmark_error"] = err.Error()
		t.logf("graph %s: %s: benchmark failed (not needed by %s): %v", t.g.Name, b.c, t.opts.Strategy.Name(), err)
		err = nil
	}
	if err != nil {
		cr.Status = backend.StatusFailed
		cr.Failure = backend.InfoOf(err, backend.FailRuntime)
		t.logf("graph %s: %s: failed (%s): %s", t.g.Name, b.c, cr.Failure.Class, cr.Failure.Message)
		return cr
	}
	cr.Status = backend.StatusPassed
	same := ""
	if b.sameAs != nil {
		same = ", the same engine as " + b.sameAs.c.String()
	}
	t.logf("graph %s: %s: built in %s, correct on %d sample(s), %s%s", t.g.Name, b.c, cr.BuildTime.Round(time.Millisecond), cr.CheckedAt, summary(cr.Benchmarks), same)
	return cr
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
		if a.Role == backend.RoleLog && size == 0 {
			continue // an empty log says nothing: no link to the empty blob
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
				if sum, size, err := bundle.SHA256File(p); err == nil && size > 0 {
					rel, _ := filepath.Rel(t.outDir, p)
					out = append(out, backend.FileRef{Role: "log", Path: filepath.ToSlash(rel), SHA256: sum, Size: size})
				}
			}
		}
	}
	return out
}
