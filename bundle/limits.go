package bundle

import (
	"fmt"

	"github.com/tunefleet/tunefleet/shapes"
)

// Bounds on every size derived from a bundle. A bundle is input from
// outside: without them a declared batch max of 2^40 passed validation and
// made every worker that took the task allocate 2^48 bytes and die, and
// names longer than a store key failed only at finalize. Each is checked by
// Open (the bundle is refused with a message naming the limit) and, for
// sizes, again right before an allocation (ResizeAxis), since a worker
// reads its manifest back from shared storage.
const (
	// MaxTensorBytes bounds one tensor: a sample file, or an input or
	// output at the graph's max shape (max batch). 4 GiB is above any
	// activation a single GPU engine is profiled with, and what a 32-bit
	// byte offset (ONNX Runtime's, TensorRT's) can still address.
	MaxTensorBytes int64 = 4 << 30
	// MaxBatchBytes bounds every input and output of one graph together at
	// its max shape: what a min/max run or a benchmark at the largest batch
	// holds in memory at once (twice, counting the child's copy).
	MaxBatchBytes int64 = 16 << 30
	// MaxSampleSetBytes bounds the sample files of one graph together: the
	// tuner holds a graph's samples in memory for the whole task.
	MaxSampleSetBytes int64 = 16 << 30
	// MaxGraphs bounds the graph specs of a bundle: one queue task each.
	MaxGraphs = 10_000
	// MaxSamples bounds the recorded samples of one graph.
	MaxSamples = 10_000
	// MaxTensors bounds a graph's inputs plus outputs.
	MaxTensors = 1_000
	// MaxRank bounds a tensor's rank (ONNX Runtime and TensorRT stop at 8).
	MaxRank = 64
	// MaxModelNameBytes and MaxGraphNameBytes keep every store key a name
	// appears in under S3's 1,024-byte limit: the longest are
	// runs/<model>-<12 hex>/graphs/<graph>/attempts/<n>/result.json and
	// models/<model>/<platform ≤ 64>/latest.json, about 460 bytes at 200+200.
	MaxModelNameBytes = 200
	MaxGraphNameBytes = 200
	// MaxTensorNameBytes bounds a tensor's name (it reaches trtexec command
	// lines and result.json, not keys).
	MaxTensorNameBytes = 4096
	// MaxManifestBytes bounds bundle.json, read whole into memory.
	MaxManifestBytes = 64 << 20
	// MaxONNXBytes bounds an ONNX file, read whole into memory: protobuf
	// cannot serialize a message over 2 GiB (larger models keep their
	// weights as external data).
	MaxONNXBytes int64 = 2 << 30
)

// boundedProduct multiplies the dims and elem (bytes per element) and
// reports whether the product stays within limit, checking before every
// step so that no intermediate value overflows.
func boundedProduct(dims []int64, elem, limit int64) (int64, bool) {
	n := elem
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		if d > 0 && n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= limit
}

// gib renders a byte limit for messages.
func gib(n int64) string { return fmt.Sprintf("%d GiB", n>>30) }

// maxShape is the largest shape a tensor may take while a graph is tuned:
// its declared max, widened by the explicit dims of an input, with each
// batch axis at least bs (the min/max runs and benchmarks use one batch
// size for every tensor). An output (scaleFrom > 0, the declared max
// batch) has its batch axes scaled by how far bs goes beyond scaleFrom,
// as the tuner sizes y[4N] from x[N].
func maxShape(d TensorDecl, explicit []shapes.Dim, bs, scaleFrom int64) []int64 {
	out := append([]int64{}, d.Max...)
	if len(explicit) == len(out) {
		for i, e := range explicit {
			v := e.Size
			if !e.IsStatic() {
				v = max(e.Max, e.Opt)
			}
			out[i] = max(out[i], v)
		}
	}
	for _, ax := range d.BatchAxes() {
		if ax >= len(out) {
			continue
		}
		if scaleFrom > 0 && bs > scaleFrom {
			scale := (bs + scaleFrom - 1) / scaleFrom
			if out[ax] > 0 && scale > shapes.MaxDim/out[ax] {
				out[ax] = shapes.MaxDim + 1
			} else {
				out[ax] *= scale
			}
		}
		out[ax] = max(out[ax], bs)
	}
	return out
}

// checkSizes returns the problems of a graph whose tensors at their max
// shape exceed MaxTensorBytes, or together MaxBatchBytes.
func (b *Bundle) checkSizes(g Graph) []string {
	var probs []string
	specs := Specs(g.Inputs)
	explicit := b.Manifest.DynamicShapes
	bs := int64(shapes.MaxBatchSize(specs, explicit))
	declaredBS := int64(shapes.MaxBatchSize(specs, nil))
	var total int64
	over := false
	check := func(kind string, d TensorDecl, dims []shapes.Dim, scaleFrom int64) {
		if over {
			return // one tensor says it: the others are too large for the same reason
		}
		shape := maxShape(d, dims, bs, scaleFrom)
		n, ok := boundedProduct(shape, int64(d.DType.Size()), MaxTensorBytes)
		if !ok {
			probs = append(probs, fmt.Sprintf("%s %q at its max shape %s (batch %d) holds more than %s, the limit per tensor (bundle.MaxTensorBytes)",
				kind, d.Name, shapes.FormatShape(shape), bs, gib(MaxTensorBytes)))
			over = true
			return
		}
		total += n
	}
	for _, d := range g.Inputs {
		check("input", d, explicit[d.Name], 0)
	}
	for _, d := range g.Outputs {
		check("output", d, nil, declaredBS)
	}
	if !over && total > MaxBatchBytes {
		probs = append(probs, fmt.Sprintf("its inputs and outputs at the max shape (batch %d) hold %d bytes, more than %s, the limit per batch (bundle.MaxBatchBytes)",
			bs, total, gib(MaxBatchBytes)))
	}
	return probs
}
