package bundlegen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// maxProbeSize bounds the sizes tried for a free axis: 2^16 samples of
// audio, tokens or pixels, far past any front end's window.
const maxProbeSize = 1 << 16

// trySuggestion runs the model at the suggested min and max shapes before
// the suggestion is proposed. When it does not run, it looks for the
// smallest size of the free axes (those the suggestion set to 16) that
// does, and proposes that. need comes back with its suggestion and Note
// updated; the error to show is always need (the user has to give the
// shapes), unless the machine failed.
func trySuggestion(ctx context.Context, modelPath string, o ONNXOptions, need *NeedShapesError) error {
	o.Ranges = need.Flags
	o.BatchAxes = maps.Clone(o.BatchAxes)
	if o.BatchAxes == nil {
		o.BatchAxes = map[string]int{}
	}
	maps.Copy(o.BatchAxes, need.BatchAxes)
	io, g, err := declare(modelPath, &o)
	if err != nil {
		return need // the suggestion itself does not declare: show it as it is
	}
	eng, err := referenceEngine(ctx, modelPath, g, o)
	if err != nil {
		if backend.ClassOf(err, backend.FailBuild) == backend.FailInfrastructure {
			// The shapes are still the user's to give (exit 2), whether or
			// not this machine could try the suggestion.
			need.Note = fmt.Sprintf(" (not tried: ONNX Runtime is not available here: %s)", clipORT(err))
		}
		return need
	}
	defer eng.Close()
	sp := &sampler{eng: eng, io: io, graph: g, o: &o, rng: rand.New(rand.NewPCG(o.Seed, 1))}
	runErr := sp.bounds(ctx, g)
	if runErr == nil {
		need.Note = " (tried: ONNX Runtime runs the model at these min and max shapes)"
		return need
	}
	if backend.ClassOf(runErr, backend.FailRuntime) == backend.FailInfrastructure {
		return runErr
	}
	if len(need.Other) == 0 {
		need.Note = fmt.Sprintf("; but the model does not run at these shapes either (ONNX Runtime: %s): give shapes it accepts", clipORT(runErr))
		return need
	}
	at := func(size int64) error {
		g2 := withSize(g, need.Other, size)
		sp.graph = g2
		return sp.bounds(ctx, g2)
	}
	size, ok := smallestThatRuns(16, at)
	var names []string
	for _, a := range need.Other {
		names = append(names, fmt.Sprintf("%s axis %d", a.Input, a.Axis))
	}
	if !ok {
		need.Note = fmt.Sprintf("; but the model does not run at these shapes (ONNX Runtime: %s), nor with %s at any size up to %d: give shapes it accepts", clipORT(runErr), strings.Join(names, ", "), maxProbeSize)
		return need
	}
	need.Suggested = resize(need.Suggested, need.Other, size)
	need.Note = fmt.Sprintf(" (tried: at 16, %s, the model does not run: ONNX Runtime: %s; the smallest size that runs is %d)", strings.Join(names, ", "), clipORT(runErr), size)
	return need
}

// smallestThatRuns doubles from start until at(size) succeeds, then
// bisects down to the smallest size that does; false if none up to
// maxProbeSize does.
func smallestThatRuns(start int64, at func(int64) error) (int64, bool) {
	bad, good := start, int64(0)
	for s := start * 2; s <= maxProbeSize; s *= 2 {
		if at(s) == nil {
			good = s
			break
		}
		bad = s
	}
	if good == 0 {
		return 0, false
	}
	for good-bad > 1 {
		mid := (bad + good) / 2
		if at(mid) == nil {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, true
}

// withSize is g with the given axes fixed at size.
func withSize(g bundle.Graph, axes []inputAxis, size int64) bundle.Graph {
	out := g
	out.Inputs = make([]bundle.TensorDecl, len(g.Inputs))
	for i, d := range g.Inputs {
		d.Min, d.Max = append([]int64{}, d.Min...), append([]int64{}, d.Max...)
		for _, a := range axes {
			if a.Input == d.Name && a.Axis < len(d.Min) {
				d.Min[a.Axis], d.Max[a.Axis] = size, size
			}
		}
		out.Inputs[i] = d
	}
	return out
}

// resize rewrites the suggested --shape flags with the axes at size.
func resize(flags []string, axes []inputAxis, size int64) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = f
		rest, extra, _ := strings.Cut(strings.TrimPrefix(f, "--shape "), " ")
		name, lo, hi, err := shapes.ParseRange(rest)
		if err != nil {
			continue
		}
		for _, a := range axes {
			if a.Input == name && a.Axis < len(lo) {
				lo[a.Axis], hi[a.Axis] = size, size
			}
		}
		out[i] = fmt.Sprintf("--shape %s:%s..%s", name, shapes.FormatShape(lo), shapes.FormatShape(hi))
		if extra != "" {
			out[i] += " " + extra
		}
	}
	return out
}

// bounds runs the graph once at its min and once at its max shapes.
func (sp *sampler) bounds(ctx context.Context, g bundle.Graph) error {
	for _, pick := range []func(bundle.TensorDecl) []int64{
		func(d bundle.TensorDecl) []int64 { return d.Min },
		func(d bundle.TensorDecl) []int64 { return d.Max },
	} {
		if _, err := sp.run(ctx, pick); err != nil {
			return err
		}
	}
	return nil
}

// explainShapes is for shapes the user gave that the model does not run
// at: it names the input and axis whose size is the problem, and the
// smallest size that runs, found by growing each free axis (dynamic in the
// model, not the batch) alone.
func explainShapes(ctx context.Context, sp *sampler, runErr error) error {
	g := sp.graph
	defer func() { sp.graph = g }()
	for i, d := range g.Inputs {
		in := sp.io.Inputs[i]
		for ax := range d.Min {
			if ax >= len(in.Dims) || in.Dims[ax] >= 0 || ax == batchAxis(d) {
				continue
			}
			axes := []inputAxis{{d.Name, ax}}
			at := func(size int64) error {
				g2 := withSize(g, axes, size)
				for k := range g2.Inputs {
					if k == i {
						g2.Inputs[k].Max[ax] = max(size, d.Max[ax])
					}
				}
				sp.graph = g2
				return sp.bounds(ctx, g2)
			}
			start := max(d.Min[ax], 1)
			if size, ok := smallestThatRuns(start, at); ok {
				lo, hi := append([]int64{}, d.Min...), append([]int64{}, d.Max...)
				lo[ax], hi[ax] = size, max(size, hi[ax])
				return fmt.Errorf("the model does not run at the shapes given: input %q axis %d is too small at %d; the smallest size that runs is %d: use --shape %s:%s..%s (ONNX Runtime: %s)",
					d.Name, ax, d.Min[ax], size, d.Name, shapes.FormatShape(lo), shapes.FormatShape(hi), clipORT(runErr))
			}
		}
	}
	return runErr
}

func batchAxis(d bundle.TensorDecl) int {
	if axes := d.BatchAxes(); len(axes) > 0 {
		return axes[0]
	}
	return -1
}

// clipORT is ONNX Runtime's message, cut to a few hundred characters.
func clipORT(err error) string {
	var f *backend.Failure
	msg := err.Error()
	if errors.As(err, &f) && f.Err != nil {
		msg = f.Err.Error()
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// referenceEngine builds the reference engine (all optimizations off).
func referenceEngine(ctx context.Context, modelPath string, g bundle.Graph, o ONNXOptions) (backend.Engine, error) {
	absModel, err := filepath.Abs(modelPath)
	if err != nil {
		return nil, err
	}
	cand, _ := backend.ParseCandidate(ReferenceCandidate)
	// Each engine gets its own folder: an engine's files (the optimized
	// model, its external data) must not meet another's.
	work, err := os.MkdirTemp(o.WorkDir, "engine-")
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "build", err)
	}
	return o.Reference.Build(ctx, backend.BuildRequest{Model: o.Model, Graph: g, ONNXPath: absModel, Candidate: cand, WorkDir: work})
}
