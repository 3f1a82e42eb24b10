package bundlegen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// ONNXOptions say how to make a bundle from an ONNX file.
type ONNXOptions struct {
	Model   string // model name; default: the file's base name
	Ranges  []string
	Samples int    // recorded samples per graph (≥ 1)
	Seed    uint64 // random inputs are a function of the seed
	// IntLo and IntHi bound random integer inputs (inclusive), e.g. so that
	// indices stay in range.
	IntLo, IntHi int64
	// Reference runs the original model to record reference outputs; the
	// candidate used is ReferenceCandidate (all optimizations off).
	Reference backend.Backend
	WorkDir   string // scratch space for the reference engine
}

// ReferenceCandidate computes reference outputs: ONNX Runtime with every
// graph optimization disabled, the closest thing to the original model.
const ReferenceCandidate = "ort:cpu:disabled"

// FromONNX writes a one-graph bundle at dest from an ONNX file.
func FromONNX(ctx context.Context, modelPath, dest string, o ONNXOptions) (*bundle.Bundle, error) {
	if o.Samples < 1 {
		return nil, fmt.Errorf("--samples must be at least 1")
	}
	if o.IntLo > o.IntHi {
		return nil, fmt.Errorf("integer range %d..%d is empty", o.IntLo, o.IntHi)
	}
	io, err := bundle.ReadGraphIO(modelPath)
	if err != nil {
		return nil, err
	}
	if len(io.Inputs) == 0 {
		return nil, fmt.Errorf("%s has no inputs; graphs without inputs cannot be tuned", modelPath)
	}
	ranges := map[string][2][]int64{}
	for _, r := range o.Ranges {
		name, lo, hi, err := shapes.ParseRange(r)
		if err != nil {
			return nil, err
		}
		if _, dup := ranges[name]; dup {
			return nil, fmt.Errorf("--shape %s is given twice", name)
		}
		ranges[name] = [2][]int64{lo, hi}
	}
	var inDecls []bundle.TensorDecl
	for _, in := range io.Inputs {
		lo, hi, err := inputRange(in, ranges)
		if err != nil {
			return nil, err
		}
		delete(ranges, in.Name)
		inDecls = append(inDecls, bundle.TensorDecl{TensorSpec: shapes.SpecFromRange(in.Name, lo, hi, true), DType: in.DType})
	}
	for name := range ranges {
		return nil, fmt.Errorf("--shape names %q, which is not an input of %s (inputs: %s)", name, modelPath, strings.Join(inputNames(io), ", "))
	}
	if o.Model == "" {
		o.Model = ModelName(strings.TrimSuffix(filepath.Base(modelPath), filepath.Ext(modelPath)))
	}
	absModel, err := filepath.Abs(modelPath)
	if err != nil {
		return nil, err
	}
	g := bundle.Graph{Name: "0", ONNX: "graphs/0/model.onnx", Inputs: inDecls}
	for _, out := range io.Outputs {
		g.Outputs = append(g.Outputs, bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: out.Name}, DType: out.DType})
	}
	// Claim the destination first: a non-empty -o is reported before any
	// work, and the staging directory is removed on every error below.
	w, err := bundle.NewWriter(dest)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	cand, _ := backend.ParseCandidate(ReferenceCandidate)
	eng, err := o.Reference.Build(ctx, backend.BuildRequest{Model: o.Model, Graph: g, ONNXPath: absModel, Candidate: cand, WorkDir: o.WorkDir})
	if err != nil {
		return nil, fmt.Errorf("reference outputs: %w", err)
	}
	defer eng.Close()
	rng := rand.New(rand.NewPCG(o.Seed, 0x7475_6e65_666c_6565))
	run := func(shapesOf func(bundle.TensorDecl) []int64) (bundle.Sample, error) {
		var s bundle.Sample
		for _, d := range inDecls {
			s.Inputs = append(s.Inputs, randomTensor(rng, d.Name, d.DType, shapesOf(d), o.IntLo, o.IntHi))
		}
		outs := make([]backend.OutputSpec, len(g.Outputs))
		for i, d := range g.Outputs {
			outs[i] = backend.OutputSpec{Name: d.Name, DType: d.DType}
		}
		got, err := eng.Run(ctx, s.Inputs, outs)
		if err != nil {
			return s, fmt.Errorf("reference outputs: %w", err)
		}
		s.Outputs = got
		return s, nil
	}
	// Sample k interpolates from the max shape (k = 0, the sample that
	// benchmarks batch from) down to the min shape.
	var samples []bundle.Sample
	for k := 0; k < o.Samples; k++ {
		s, err := run(func(d bundle.TensorDecl) []int64 { return interpolate(d.Min, d.Max, k, o.Samples) })
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
	}
	// Output bounds come from running the model at the inputs' min and max
	// shapes as well, so that they hold for every batch size in the profile.
	bounds := append([]bundle.Sample{}, samples...)
	for _, pick := range []func(bundle.TensorDecl) []int64{
		func(d bundle.TensorDecl) []int64 { return d.Min },
		func(d bundle.TensorDecl) []int64 { return d.Max },
	} {
		s, err := run(pick)
		if err != nil {
			return nil, err
		}
		bounds = append(bounds, s)
	}
	g.Outputs = declsFromSamples(io.Outputs, bounds, func(s bundle.Sample) []bundle.Tensor { return s.Outputs })
	if err := w.CopyFile(g.ONNX, modelPath); err != nil {
		return nil, err
	}
	// The model's external data goes beside it, where ONNX looks for it.
	// A location that is absolute or climbs out is not copied: Open
	// refuses the bundle and says why.
	for _, loc := range io.ExternalData {
		if loc == "" || path.IsAbs(loc) || slices.Contains(strings.Split(loc, "/"), "..") || strings.ContainsAny(loc, "\\\x00") {
			continue
		}
		if err := w.CopyFile(path.Join(path.Dir(g.ONNX), loc), filepath.Join(filepath.Dir(modelPath), filepath.FromSlash(loc))); err != nil {
			return nil, fmt.Errorf("external data %q of %s: %w", loc, modelPath, err)
		}
	}
	for k, s := range samples {
		rel := fmt.Sprintf("graphs/0/samples/%d", k)
		g.Samples = append(g.Samples, rel)
		if err := w.WriteSample(rel, s); err != nil {
			return nil, err
		}
	}
	committed = true // Commit cleans up after itself
	return w.Commit(bundle.Manifest{Format: bundle.FormatV1, Model: o.Model, Graphs: []bundle.Graph{g}})
}

func inputNames(io bundle.GraphIO) []string {
	var out []string
	for _, in := range io.Inputs {
		out = append(out, in.Name)
	}
	return out
}

// inputRange returns the min and max shape of an input: from --shape, or
// the model's own dims when they are all static.
func inputRange(in bundle.ValueInfo, ranges map[string][2][]int64) ([]int64, []int64, error) {
	r, given := ranges[in.Name]
	if !given {
		if !in.RankKnown() {
			return nil, nil, fmt.Errorf("input %q has no declared shape; give --shape %s:MIN..MAX", in.Name, in.Name)
		}
		for i, d := range in.Dims {
			if d < 0 {
				return nil, nil, fmt.Errorf("input %q has dynamic dims (%s, axis %d is %q); give --shape %s:MIN..MAX, e.g. %s:%s..%s",
					in.Name, dimString(in), i, in.Params[i], in.Name, in.Name, example(in, 1), example(in, 32))
			}
		}
		return in.Dims, in.Dims, nil
	}
	lo, hi := r[0], r[1]
	if in.RankKnown() {
		if len(lo) != len(in.Dims) {
			return nil, nil, fmt.Errorf("--shape %s has rank %d, the model's input has rank %d (%s)", in.Name, len(lo), len(in.Dims), dimString(in))
		}
		for i, d := range in.Dims {
			if d >= 0 && (lo[i] != d || hi[i] != d) {
				return nil, nil, fmt.Errorf("--shape %s: axis %d is fixed at %d in the model (%s)", in.Name, i, d, dimString(in))
			}
		}
	}
	return lo, hi, nil
}

func dimString(in bundle.ValueInfo) string {
	parts := make([]string, len(in.Dims))
	for i, d := range in.Dims {
		if d < 0 {
			parts[i] = in.Params[i]
			if parts[i] == "" {
				parts[i] = "?"
			}
		} else {
			parts[i] = fmt.Sprint(d)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func example(in bundle.ValueInfo, dyn int64) string {
	s := make([]int64, len(in.Dims))
	for i, d := range in.Dims {
		s[i] = d
		if d < 0 {
			s[i] = dyn
		}
	}
	return shapes.FormatShape(s)
}

func interpolate(lo, hi []int64, k, n int) []int64 {
	out := make([]int64, len(lo))
	for i := range lo {
		if n == 1 {
			out[i] = hi[i]
			continue
		}
		out[i] = hi[i] - (hi[i]-lo[i])*int64(k)/int64(n-1)
	}
	return out
}

// randomTensor fills a tensor with values from rng: floats uniform in
// [-1, 1), integers uniform in [lo, hi], bools fair coins.
func randomTensor(rng *rand.Rand, name string, d bundle.DType, shape []int64, lo, hi int64) bundle.Tensor {
	n := bundle.NumElements(shape)
	size := d.Size()
	data := make([]byte, n*int64(size))
	for i := int64(0); i < n; i++ {
		b := data[i*int64(size):]
		f := rng.Float64()*2 - 1
		iv := lo + rng.Int64N(hi-lo+1)
		switch {
		case d.IsFloat():
			bundle.PutFloat(b, d, f)
		case d == bundle.Bool:
			b[0] = byte(rng.IntN(2))
		default:
			bundle.PutUint(b, size, uint64(iv))
		}
	}
	return bundle.Tensor{Name: name, DType: d, Shape: append([]int64{}, shape...), Data: data}
}
