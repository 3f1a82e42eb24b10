package shapes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultBatchSizes are the sizes a sweep may use, AITune's default
// profiling config: 1, 2, 4, …, 2^20.
func DefaultBatchSizes() []int {
	out := make([]int, 21)
	for i := range out {
		out[i] = 1 << i
	}
	return out
}

// BatchAxes returns the indices of the spec's batch axes.
func (t TensorSpec) BatchAxes() []int {
	var out []int
	for i, a := range t.Shape {
		if a.IsBatch() {
			out = append(out, i)
		}
	}
	return out
}

// MaxBatchSize is the largest batch every input accepts: per input, the
// largest of its batch axes' maximums (an explicit batch dim's max where one
// is declared, else the recorded max), and over the inputs the smallest of
// those, since one batch size is run through all of them (and a TensorRT
// profile holds each input to its own max); 1 when there is no batch axis.
func MaxBatchSize(inputs []TensorSpec, explicit DynamicShapes) int {
	best := 0
	for _, in := range inputs {
		inMax := 0
		for _, ax := range in.BatchAxes() {
			v := in.Max[ax]
			if dims, ok := explicit[in.Name]; ok && ax < len(dims) && dims[ax].Batch {
				v = dims[ax].Max
			}
			inMax = max(inMax, int(v))
		}
		if inMax > 0 && (best == 0 || inMax < best) {
			best = inMax
		}
	}
	if best == 0 {
		return 1
	}
	return best
}

// MinBatchSize is the smallest batch every input accepts: the largest of
// the batch axes' minimums (an explicit batch dim's min where one is
// declared, else the recorded min); 1 when there is no batch axis.
func MinBatchSize(inputs []TensorSpec, explicit DynamicShapes) int {
	best := 1
	for _, in := range inputs {
		for _, ax := range in.BatchAxes() {
			var v int64
			if ax < len(in.Min) {
				v = in.Min[ax]
			}
			if dims, ok := explicit[in.Name]; ok && ax < len(dims) && dims[ax].Batch {
				v = dims[ax].Min
			}
			best = max(best, int(v))
		}
	}
	return best
}

// AnyBatchAxis is true when at least one input has a batch axis.
func AnyBatchAxis(inputs []TensorSpec) bool {
	for _, in := range inputs {
		if len(in.BatchAxes()) > 0 {
			return true
		}
	}
	return false
}

// BatchSizes returns the batch sizes to benchmark: when some input has a
// batch axis and the max batch size is above 1, the candidate sizes up to
// that max (or just the max when none is that small); otherwise nil,
// meaning "run the recorded sample as it is" (NoSweepReason says why).
// Inputs without a batch axis (a sample rate, a fixed-size table) keep
// their recorded value at every batch size. AITune sweeps only when every
// input has a batch axis; a scalar beside the batched tensors would turn
// the sweep off for all of them, which is the wrong answer for a model
// whose batch is carried by the other inputs. Unlike AITune, whose engines
// always accept batch 1, sizes below the graph's declared minimum batch
// are left out: an engine built for batches 4..64 cannot run 1.
func BatchSizes(inputs []TensorSpec, explicit DynamicShapes, candidates []int) []int {
	if NoSweepReason(inputs, explicit) != "" {
		return nil
	}
	maxBS := MaxBatchSize(inputs, explicit)
	minBS := MinBatchSize(inputs, explicit)
	var out []int
	for _, b := range candidates {
		if b >= minBS && b <= maxBS && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []int{maxBS}
	}
	return out
}

// NoSweepReason says why BatchSizes has no sweep for these inputs, or ""
// when it has one: it goes into result.json beside the single measurement,
// so that "measured at one batch" is never a silent surprise.
func NoSweepReason(inputs []TensorSpec, explicit DynamicShapes) string {
	if !AnyBatchAxis(inputs) {
		return "no input has a batch axis (a varying axis labelled batch<i>: axis 0, an ONNX dim named batch/N/batch_size, or --batch-axis INPUT:AXIS when the bundle is made); the recorded sample was measured as it is"
	}
	if MaxBatchSize(inputs, explicit) <= 1 {
		return "the largest batch the inputs allow is 1; the recorded sample was measured as it is"
	}
	return ""
}

// BatchShape returns shape with every batch axis of t set to bs.
func (t TensorSpec) BatchShape(shape []int64, bs int) []int64 {
	out := clone(shape)
	for _, ax := range t.BatchAxes() {
		if ax < len(out) {
			out[ax] = int64(bs)
		}
	}
	return out
}

// ParseRange reads a CLI shape range "NAME:MIN..MAX" such as
// "input:1x64..32x64" (or "NAME:SHAPE" for a static shape). The name is
// everything before the last colon, so names containing colons work.
func ParseRange(s string) (name string, lo, hi []int64, err error) {
	i := strings.LastIndex(s, ":")
	if i <= 0 {
		return "", nil, nil, fmt.Errorf("shape %q: want NAME:MIN..MAX, e.g. input:1x64..32x64", s)
	}
	name, rng := s[:i], s[i+1:]
	a, b, ok := strings.Cut(rng, "..")
	if !ok {
		b = a
	}
	if lo, err = ParseShape(a); err != nil {
		return "", nil, nil, fmt.Errorf("shape %q: %w", s, err)
	}
	if hi, err = ParseShape(b); err != nil {
		return "", nil, nil, fmt.Errorf("shape %q: %w", s, err)
	}
	if len(lo) != len(hi) {
		return "", nil, nil, fmt.Errorf("shape %q: min has rank %d, max has rank %d", s, len(lo), len(hi))
	}
	for k := range lo {
		if lo[k] > hi[k] {
			return "", nil, nil, fmt.Errorf("shape %q: axis %d min %d is above max %d", s, k, lo[k], hi[k])
		}
	}
	return name, lo, hi, nil
}

// SpecFromRange labels a min/max range as a tensor spec: axes whose bounds
// agree are static; a varying axis 0 is a batch axis when batch is true,
// every other varying axis is "dim<i>".
func SpecFromRange(name string, lo, hi []int64, batch bool) TensorSpec {
	ax := NoBatchAxis
	if batch {
		ax = 0
	}
	return SpecWithBatchAxis(name, lo, hi, ax)
}

// NoBatchAxis is SpecWithBatchAxis's "this tensor has no batch axis".
const NoBatchAxis = -1

// SpecWithBatchAxis labels a min/max range as a tensor spec whose batch
// axis is batchAxis (NoBatchAxis for none): axes whose bounds agree are
// static, the varying batch axis is "batch<i>", every other varying axis is
// "dim<i>". A batch axis need not be axis 0: a recurrent state [2, N, 64]
// has it at 1.
func SpecWithBatchAxis(name string, lo, hi []int64, batchAxis int) TensorSpec {
	t := TensorSpec{Name: name, Min: clone(lo), Max: clone(hi)}
	for i := range lo {
		switch {
		case lo[i] == hi[i]:
			t.Shape = append(t.Shape, Static(lo[i]))
		case i == batchAxis:
			t.Shape = append(t.Shape, BatchAxis(i))
		default:
			t.Shape = append(t.Shape, DynAxis(i))
		}
	}
	return t
}

// batchDimNames are the ONNX dim names (dim_param) that exporters write for
// a batch axis: PyTorch's dynamic_axes examples ("batch", "batch_size"),
// ONNX's operator docs and Caffe2's "N", and the short "B" and "bs".
var batchDimNames = map[string]bool{
	"batch": true, "batch_size": true, "batchsize": true, "batch_dim": true,
	"n": true, "b": true, "bs": true, "nbatch": true, "num_batches": true,
}

// IsBatchDimName reports whether an ONNX dim name says "batch"
// (case-insensitive): "batch", "N", "batch_size", "B", …
func IsBatchDimName(param string) bool {
	return batchDimNames[strings.ToLower(strings.TrimSpace(param))]
}

// ParseBatchAxis reads a CLI "INPUT:AXIS" such as "state:1"; the name is
// everything before the last colon, as in ParseRange.
func ParseBatchAxis(s string) (name string, axis int, err error) {
	i := strings.LastIndex(s, ":")
	if i <= 0 {
		return "", 0, fmt.Errorf("--batch-axis %q: want INPUT:AXIS, e.g. state:1", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("--batch-axis %q: axis %q is not a non-negative integer", s, s[i+1:])
	}
	return s[:i], n, nil
}
