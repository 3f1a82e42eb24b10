package bundlegen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
	// BatchAxes names an input's batch axis where the model's dim names do
	// not say it (--batch-axis INPUT:AXIS), e.g. a recurrent state [2,?,64].
	BatchAxes map[string]int
	// Tolerances are written into the bundle (--atol/--rtol).
	Tolerances []bundle.ToleranceOverride
	// Values fill an input with one value in every sample instead of
	// random ones (--value INPUT=VALUE): a sample rate, a sequence length,
	// a flag that picks a branch of the graph.
	Values map[string]float64
	// Outputs keeps only these outputs (--outputs a,b): the graph is
	// pruned to what they need, and only they are recorded.
	Outputs []string
	// DynamicBatch turns axis 0 of inputs and outputs fixed at 1 into a
	// dynamic batch (--dynamic-batch), once running batch 2 has shown the
	// graph batch-agnostic. Such inputs without a --shape get batch 1..8.
	DynamicBatch bool
}

// ReferenceCandidate computes reference outputs: ONNX Runtime with every
// graph optimization disabled, the closest thing to the original model.
const ReferenceCandidate = "ort:cpu:disabled"

// FromONNX writes a one-graph bundle at dest from an ONNX file.
func FromONNX(ctx context.Context, modelPath, dest string, o ONNXOptions) (*bundle.Bundle, error) {
	original := modelPath
	var batched []string
	if len(o.Outputs) > 0 || o.DynamicBatch {
		if o.Model == "" {
			o.Model = ModelName(strings.TrimSuffix(filepath.Base(modelPath), filepath.Ext(modelPath)))
		}
		if err := checkDest(dest); err != nil {
			return nil, err
		}
		dir := filepath.Join(o.WorkDir, "rewritten")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, b, err := rewriteModel(modelPath, dir, o.Outputs, o.DynamicBatch)
		if err != nil {
			return nil, err
		}
		modelPath, batched = p, b
		if len(batched) > 0 {
			o.Ranges = withBatchRanges(modelPath, o.Ranges, batched)
		}
	}
	io, g, err := declare(modelPath, &o)
	if need := (*NeedShapesError)(nil); errors.As(err, &need) && o.Reference != nil {
		return nil, trySuggestion(ctx, modelPath, o, need)
	}
	if err != nil {
		return nil, err
	}
	if len(batched) > 0 {
		if err := proveBatchAgnostic(ctx, original, g, batched, o); err != nil {
			return nil, err
		}
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
	eng, err := referenceEngine(ctx, modelPath, g, o)
	if err != nil {
		return nil, fmt.Errorf("reference outputs: %w", err)
	}
	defer eng.Close()
	sp := &sampler{eng: eng, io: io, graph: g, o: &o, rng: rand.New(rand.NewPCG(o.Seed, 0x7475_6e65_666c_6565))}
	samples, bounds, err := sp.all(ctx)
	if err != nil {
		if backend.ClassOf(err, backend.FailRuntime) != backend.FailInfrastructure && ctx.Err() == nil {
			err = explainShapes(ctx, sp, err)
		}
		return nil, err
	}
	g.Outputs = declsFromSamples(io.Outputs, bounds, func(s bundle.Sample) []bundle.Tensor { return s.Outputs }, batchDimNames(io, o.BatchAxes), batchOfInputs(g.Inputs))
	if err := writeGraph(w, &g, modelPath, io, samples); err != nil {
		return nil, err
	}
	committed = true // Commit cleans up after itself
	return w.Commit(bundle.Manifest{Format: bundle.FormatV1, Model: o.Model, Graphs: []bundle.Graph{g}})
}

// checkDest refuses a destination that exists and is not an empty
// directory before any work (bundle.NewWriter says the same, later).
func checkDest(dest string) error {
	if entries, err := os.ReadDir(dest); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty; name a new directory", dest)
	}
	return nil
}

// withBatchRanges gives every input --dynamic-batch made dynamic, and
// that has no --shape, the range batch 1..8 at its other (static) dims.
func withBatchRanges(modelPath string, ranges []string, batched []string) []string {
	gio, err := bundle.ReadGraphIO(modelPath)
	if err != nil {
		return ranges
	}
	given := map[string]bool{}
	for _, r := range ranges {
		if name, _, _, err := shapes.ParseRange(r); err == nil {
			given[name] = true
		}
	}
	out := slices.Clone(ranges)
	for _, in := range gio.Inputs {
		if !slices.Contains(batched, in.Name) || given[in.Name] || slices.ContainsFunc(in.Dims[1:], func(d int64) bool { return d < 0 }) {
			continue
		}
		lo, hi := slices.Clone(in.Dims), slices.Clone(in.Dims)
		lo[0], hi[0] = 1, 8
		out = append(out, fmt.Sprintf("%s:%s..%s", in.Name, shapes.FormatShape(lo), shapes.FormatShape(hi)))
	}
	return out
}

// declare checks the options against the model and declares its one graph:
// inputs with their ranges and batch axes, outputs by dtype (their shapes
// come from running it), tolerance overrides. Everything here is the
// user's to fix, so it is said before any work.
func declare(modelPath string, o *ONNXOptions) (bundle.GraphIO, bundle.Graph, error) {
	if o.Samples < 1 {
		return bundle.GraphIO{}, bundle.Graph{}, fmt.Errorf("--samples must be at least 1")
	}
	if o.IntLo > o.IntHi {
		return bundle.GraphIO{}, bundle.Graph{}, fmt.Errorf("integer range %d..%d is empty", o.IntLo, o.IntHi)
	}
	io, err := bundle.ReadGraphIO(modelPath)
	if err != nil {
		return io, bundle.Graph{}, err
	}
	if len(io.Inputs) == 0 {
		return bundle.GraphIO{}, bundle.Graph{}, fmt.Errorf("%s has no inputs; graphs without inputs cannot be tuned", modelPath)
	}
	inDecls, err := inputDecls(io, o.Ranges, o.BatchAxes)
	if err != nil {
		return bundle.GraphIO{}, bundle.Graph{}, err
	}
	for name := range o.Values {
		if !slices.Contains(inputNames(io), name) {
			return bundle.GraphIO{}, bundle.Graph{}, fmt.Errorf("--value names %q, which is not an input (inputs: %s)", name, strings.Join(inputNames(io), ", "))
		}
	}
	if o.Model == "" {
		o.Model = ModelName(strings.TrimSuffix(filepath.Base(modelPath), filepath.Ext(modelPath)))
	}
	g := bundle.Graph{Name: "0", ONNX: "graphs/0/model.onnx", Inputs: inDecls}
	for _, out := range io.Outputs {
		g.Outputs = append(g.Outputs, bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: out.Name}, DType: out.DType})
	}
	// A misspelt output in an override is the user's to fix, not a reason
	// to run the model first.
	probe := bundle.Manifest{Graphs: []bundle.Graph{g}}
	if err := bundle.ApplyTolerances(&probe, o.Tolerances); err != nil {
		return bundle.GraphIO{}, bundle.Graph{}, err
	}
	g.Tolerances = probe.Graphs[0].Tolerances
	return io, g, nil
}

// sampler makes samples: random inputs (from a fixed seed, with --value
// constants) and the reference engine's outputs.
type sampler struct {
	eng   backend.Engine
	io    bundle.GraphIO
	graph bundle.Graph
	o     *ONNXOptions
	rng   *rand.Rand
}

// all makes the bundle's samples, from the max shape (k = 0, the sample
// that benchmarks batch from) down to the min shape, and the bounds: those
// samples plus runs at the inputs' min and max shapes, so that the output
// declarations hold for every batch size in the profile.
func (sp *sampler) all(ctx context.Context) (samples, bounds []bundle.Sample, err error) {
	n := sp.o.Samples
	for k := 0; k < n; k++ {
		s, err := sp.run(ctx, func(d bundle.TensorDecl) []int64 { return interpolate(d.Min, d.Max, k, n) })
		if err != nil {
			return nil, nil, err
		}
		samples = append(samples, s)
	}
	bounds = append([]bundle.Sample{}, samples...)
	for _, pick := range []func(bundle.TensorDecl) []int64{
		func(d bundle.TensorDecl) []int64 { return d.Min },
		func(d bundle.TensorDecl) []int64 { return d.Max },
	} {
		s, err := sp.run(ctx, pick)
		if err != nil {
			return nil, nil, err
		}
		bounds = append(bounds, s)
	}
	return samples, bounds, nil
}

// run makes one sample whose inputs have the shapes shapesOf gives.
func (sp *sampler) run(ctx context.Context, shapesOf func(bundle.TensorDecl) []int64) (bundle.Sample, error) {
	var s bundle.Sample
	for _, d := range sp.graph.Inputs {
		t := randomTensor(sp.rng, d.Name, d.DType, shapesOf(d), sp.o.IntLo, sp.o.IntHi)
		if v, ok := sp.o.Values[d.Name]; ok {
			fill(t, v)
		}
		s.Inputs = append(s.Inputs, t)
	}
	outs, err := sp.outputSpecs(s.Inputs)
	if err != nil {
		return s, err
	}
	got, err := sp.eng.Run(ctx, s.Inputs, outs)
	if err != nil {
		return s, fmt.Errorf("reference outputs: %w", err)
	}
	s.Outputs = got
	return s, nil
}

// outputSpecs: outputs whose shape follows from the model's dims are
// allocated here; ONNX Runtime's own allocation of float16 and bfloat16
// outputs cannot be read back through onnxruntime_go v1.27. Other outputs
// ONNX Runtime sizes, as it knows best.
func (sp *sampler) outputSpecs(inputs []bundle.Tensor) ([]backend.OutputSpec, error) {
	outs := make([]backend.OutputSpec, len(sp.graph.Outputs))
	for i, d := range sp.graph.Outputs {
		outs[i] = backend.OutputSpec{Name: d.Name, DType: d.DType}
		if d.DType != bundle.Float16 && d.DType != bundle.BFloat16 {
			continue
		}
		if outs[i].Shape = outputShape(sp.io.Outputs[i], sp.io.Inputs, inputs); outs[i].Shape == nil {
			return nil, fmt.Errorf("output %q is %s with dims %s that no input's dims determine; onnxruntime_go v1.27 cannot read %s outputs whose shape only ONNX Runtime knows: name its dynamic dims as the inputs' dims are named (e.g. batch), or give the output static dims",
				d.Name, d.DType, dimString(sp.io.Outputs[i]), d.DType)
		}
	}
	return outs, nil
}

// writeGraph stages the model, its external data and the samples, and
// lists the samples in g.
func writeGraph(w *bundle.Writer, g *bundle.Graph, modelPath string, io bundle.GraphIO, samples []bundle.Sample) error {
	if err := w.CopyFile(g.ONNX, modelPath); err != nil {
		return err
	}
	// The model's external data goes beside it, where ONNX looks for it.
	// A location that is absolute or climbs out is not copied: Open
	// refuses the bundle and says why.
	for _, loc := range io.ExternalData {
		if loc == "" || path.IsAbs(loc) || slices.Contains(strings.Split(loc, "/"), "..") || strings.ContainsAny(loc, "\\\x00") {
			continue
		}
		if err := w.CopyFile(path.Join(path.Dir(g.ONNX), loc), filepath.Join(filepath.Dir(modelPath), filepath.FromSlash(loc))); err != nil {
			return fmt.Errorf("external data %q of %s: %w", loc, modelPath, err)
		}
	}
	for k, s := range samples {
		rel := fmt.Sprintf("graphs/0/samples/%d", k)
		g.Samples = append(g.Samples, rel)
		if err := w.WriteSample(rel, s); err != nil {
			return err
		}
	}
	return nil
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

// batchOfInputs gives a sample's batch: the size of the first batch axis
// of the first input that has one; nil when no input has one.
func batchOfInputs(decls []bundle.TensorDecl) func(bundle.Sample) int64 {
	for i, d := range decls {
		if axes := d.BatchAxes(); len(axes) > 0 {
			return func(s bundle.Sample) int64 {
				if i < len(s.Inputs) && axes[0] < len(s.Inputs[i].Shape) {
					return s.Inputs[i].Shape[axes[0]]
				}
				return -1
			}
		}
	}
	return nil
}

// fill sets every element of t to v (rounded toward zero for integers,
// non-zero for true).
func fill(t bundle.Tensor, v float64) {
	size := t.DType.Size()
	for i := 0; i+size <= len(t.Data); i += size {
		switch {
		case t.DType.IsFloat():
			bundle.PutFloat(t.Data[i:], t.DType, v)
		case t.DType == bundle.Bool:
			t.Data[i] = 0
			if v != 0 {
				t.Data[i] = 1
			}
		default:
			bundle.PutUint(t.Data[i:], size, uint64(int64(v)))
		}
	}
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
