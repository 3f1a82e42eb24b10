package bundletest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/shapes"
)

// Kind selects the fixture model of one graph.
type Kind int

const (
	// MLP is onnxtest.MLP(MLPIn, MLPHidden, MLPOut):
	// input[N,MLPIn] float32 → output[N,MLPOut] float32.
	MLP Kind = iota
	// TwoInputs is onnxtest.TwoInputs: a[N,8], mask[N,8] float32 →
	// y[N,8], s[N] float32.
	TwoInputs
)

// Sizes of the MLP fixture.
const (
	MLPIn     = 4
	MLPHidden = 8
	MLPOut    = 3
)

// Defaults of Write.
const (
	DefaultModel = "tests.Fixture"
	DefaultMinBS = 1
	DefaultMaxBS = 8
)

// DefaultSampleBatches are the batch sizes of the samples Write records
// per graph unless WithSamples says otherwise.
var DefaultSampleBatches = []int64{1, 4}

type config struct {
	model   string
	kinds   []Kind
	lo, hi  int64
	batches []int64
	edits   []func(*bundle.Manifest)
}

// Option changes what Write writes.
type Option func(*config)

// WithModel sets the model name (default DefaultModel).
func WithModel(name string) Option { return func(c *config) { c.model = name } }

// WithGraphs writes one graph per kind, named "0", "1", … in order
// (default: one MLP graph).
func WithGraphs(kinds ...Kind) Option {
	return func(c *config) { c.kinds = append([]Kind(nil), kinds...) }
}

// WithBatchRange sets the declared bounds of every batch axis (default
// DefaultMinBS..DefaultMaxBS).
func WithBatchRange(lo, hi int64) Option { return func(c *config) { c.lo, c.hi = lo, hi } }

// WithSamples records one sample per batch size given, in order, in every
// graph (default DefaultSampleBatches). No batch sizes means no samples,
// which does not validate.
func WithSamples(batches ...int64) Option {
	return func(c *config) { c.batches = append([]int64{}, batches...) }
}

// WithManifest edits the manifest before it is committed (tolerances,
// dynamic_shapes, module type, …). The result must still validate.
func WithManifest(edit func(*bundle.Manifest)) Option {
	return func(c *config) { c.edits = append(c.edits, edit) }
}

// ONNXPath is the bundle-relative path of a graph's ONNX file.
func ONNXPath(graph string) string { return graph + "/model.onnx" }

// SamplePath is the bundle-relative directory of a graph's i-th sample.
func SamplePath(graph string, i int) string { return fmt.Sprintf("%s/test_data_set_%d", graph, i) }

// Write writes a valid bundle into a new directory under tb.TempDir(),
// through bundle.Writer (so it is validated by bundle.Open), and returns
// the directory. Everything written is a deterministic function of the
// options.
func Write(tb testing.TB, opts ...Option) string {
	tb.Helper()
	c := config{model: DefaultModel, kinds: []Kind{MLP}, lo: DefaultMinBS, hi: DefaultMaxBS, batches: DefaultSampleBatches}
	for _, o := range opts {
		o(&c)
	}
	dir := filepath.Join(tb.TempDir(), "bundle")
	w, err := bundle.NewWriter(dir)
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	m := bundle.Manifest{Format: bundle.FormatV1, Model: c.model}
	for gi, kind := range c.kinds {
		name := fmt.Sprint(gi)
		g := bundle.Graph{Name: name, ONNX: ONNXPath(name)}
		var model *onnxtest.Builder
		switch kind {
		case MLP:
			model = onnxtest.MLP(MLPIn, MLPHidden, MLPOut)
			g.Inputs = []bundle.TensorDecl{batchDecl("input", c.lo, c.hi, MLPIn)}
			g.Outputs = []bundle.TensorDecl{batchDecl("output", c.lo, c.hi, MLPOut)}
		case TwoInputs:
			model = onnxtest.TwoInputs()
			g.Inputs = []bundle.TensorDecl{batchDecl("a", c.lo, c.hi, 8), batchDecl("mask", c.lo, c.hi, 8)}
			g.Outputs = []bundle.TensorDecl{batchDecl("y", c.lo, c.hi, 8), batchDecl("s", c.lo, c.hi)}
		default:
			w.Abort()
			tb.Fatalf("bundletest: unknown graph kind %d", kind)
		}
		if err := w.WriteFile(g.ONNX, model.Bytes()); err != nil {
			w.Abort()
			tb.Fatalf("bundletest: %v", err)
		}
		for si, bs := range c.batches {
			rel := SamplePath(name, si)
			s := bundle.Sample{
				Inputs:  tensorsFor(g.Inputs, bs, fmt.Sprintf("%s/%d/in", name, si)),
				Outputs: tensorsFor(g.Outputs, bs, fmt.Sprintf("%s/%d/out", name, si)),
			}
			if err := w.WriteSample(rel, s); err != nil {
				w.Abort()
				tb.Fatalf("bundletest: %v", err)
			}
			g.Samples = append(g.Samples, rel)
		}
		m.Graphs = append(m.Graphs, g)
	}
	for _, edit := range c.edits {
		edit(&m)
	}
	if _, err := w.Commit(m); err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	return dir
}

// batchDecl declares a float32 tensor [batch0, static...] with the batch
// axis in [lo, hi].
func batchDecl(name string, lo, hi int64, static ...int64) bundle.TensorDecl {
	spec := shapes.TensorSpec{Name: name, Shape: []shapes.Axis{shapes.BatchAxis(0)}, Min: []int64{lo}, Max: []int64{hi}}
	for _, n := range static {
		spec.Shape = append(spec.Shape, shapes.Static(n))
		spec.Min = append(spec.Min, n)
		spec.Max = append(spec.Max, n)
	}
	return bundle.TensorDecl{TensorSpec: spec, DType: bundle.Float32}
}

func tensorsFor(decls []bundle.TensorDecl, bs int64, key string) []bundle.Tensor {
	out := make([]bundle.Tensor, len(decls))
	for k, d := range decls {
		shape := append([]int64{}, d.Min...)
		shape[0] = bs
		out[k] = Float32s(d.Name, shape, Seed(fmt.Sprintf("%s/%d", key, k)))
	}
	return out
}

// Seed derives a generator seed from a string.
func Seed(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Float32s returns a float32 tensor of the given shape whose values are
// deterministic in [-1, 1), drawn from seed.
func Float32s(name string, shape []int64, seed uint64) bundle.Tensor {
	n := bundle.NumElements(shape)
	data := make([]byte, 4*n)
	x := seed | 1
	for i := int64(0); i < n; i++ {
		// xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := float32((x*2685821657736338717)>>40)/float32(1<<24)*2 - 1
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Float32, Shape: append([]int64{}, shape...), Data: data}
}

// ReadManifest reads dir/bundle.json.
func ReadManifest(tb testing.TB, dir string) bundle.Manifest {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, bundle.ManifestName))
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	m, err := bundle.ParseManifest(raw)
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	return m
}

// WriteManifest replaces dir/bundle.json with m, without validating it.
func WriteManifest(tb testing.TB, dir string, m bundle.Manifest) {
	tb.Helper()
	raw, err := m.Marshal()
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), raw, 0o644); err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
}

// EditManifest rewrites dir/bundle.json through edit, without validating
// the result: the way to break a valid bundle in one place.
func EditManifest(tb testing.TB, dir string, edit func(*bundle.Manifest)) {
	tb.Helper()
	m := ReadManifest(tb, dir)
	edit(&m)
	WriteManifest(tb, dir, m)
}
