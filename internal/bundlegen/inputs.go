package bundlegen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// inputDecls declares every input of the model: its min and max shape
// (from --shape, or the model's own dims when static) and its batch axis.
// Every input that still needs a --shape is named in one error, each with
// a suggested range, so a model with four dynamic inputs costs one try,
// not four.
func inputDecls(io bundle.GraphIO, rangeFlags []string, batchAxes map[string]int) ([]bundle.TensorDecl, error) {
	ranges := map[string][2][]int64{}
	for _, r := range rangeFlags {
		name, lo, hi, err := shapes.ParseRange(r)
		if err != nil {
			return nil, err
		}
		if _, dup := ranges[name]; dup {
			return nil, fmt.Errorf("--shape %s is given twice", name)
		}
		ranges[name] = [2][]int64{lo, hi}
	}
	names := inputNames(io)
	for name := range ranges {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("--shape names %q, which is not an input (inputs: %s)", name, strings.Join(names, ", "))
		}
	}
	for name := range batchAxes {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("--batch-axis names %q, which is not an input (inputs: %s)", name, strings.Join(names, ", "))
		}
	}
	need := &NeedShapesError{BatchAxes: map[string]int{}}
	type bounds struct{ lo, hi []int64 }
	got := make([]bounds, len(io.Inputs))
	for i, in := range io.Inputs {
		lo, hi, what, err := inputRange(in, ranges)
		if err != nil {
			return nil, err
		}
		if what != nil {
			need.Missing = append(need.Missing, what[0])
			need.Suggested = append(need.Suggested, what[1])
		}
		got[i] = bounds{lo, hi}
	}
	if len(need.Missing) > 0 {
		need.suggest(io, rangeFlags, batchAxes)
		return nil, need
	}
	batchNames := batchDimNames(io, batchAxes)
	decls := make([]bundle.TensorDecl, len(io.Inputs))
	for i, in := range io.Inputs {
		ax, err := batchAxisOf(in, got[i].lo, got[i].hi, batchAxes, batchNames)
		if err != nil {
			return nil, err
		}
		decls[i] = bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis(in.Name, got[i].lo, got[i].hi, ax), DType: in.DType}
	}
	return decls, nil
}

func inputNames(io bundle.GraphIO) []string {
	var out []string
	for _, in := range io.Inputs {
		out = append(out, in.Name)
	}
	return out
}

// inputRange returns the min and max shape of an input: from --shape, or
// the model's own dims when they are all static. need is set, instead,
// when the input needs a --shape: what it is, and a --shape to suggest.
func inputRange(in bundle.ValueInfo, ranges map[string][2][]int64) (lo, hi []int64, need []string, err error) {
	r, given := ranges[in.Name]
	if !given {
		if !in.RankKnown() {
			return nil, nil, []string{in.Name + " (no declared shape)", "--shape " + in.Name + ":MIN..MAX"}, nil
		}
		if slices.ContainsFunc(in.Dims, func(d int64) bool { return d < 0 }) {
			lo, hi := suggestRange(in)
			return nil, nil, []string{in.Name + " " + dimString(in), fmt.Sprintf("--shape %s:%s..%s", in.Name, shapes.FormatShape(lo), shapes.FormatShape(hi))}, nil
		}
		return in.Dims, in.Dims, nil, nil
	}
	lo, hi = r[0], r[1]
	if in.RankKnown() {
		if len(lo) != len(in.Dims) {
			return nil, nil, nil, fmt.Errorf("--shape %s has rank %d, the model's input has rank %d (%s)", in.Name, len(lo), len(in.Dims), dimString(in))
		}
		for i, d := range in.Dims {
			if d >= 0 && (lo[i] != d || hi[i] != d) {
				return nil, nil, nil, fmt.Errorf("--shape %s: axis %d is fixed at %d in the model (%s)", in.Name, i, d, dimString(in))
			}
		}
	}
	return lo, hi, nil, nil
}

// batchDimNames are the dim names that mean "batch" in this model: the
// usual ones (batch, N, batch_size, …) and those at the axes --batch-axis
// names, so that a state [2, n_seq, 64] follows an input [n_seq, 512]
// once one of them is pointed out.
func batchDimNames(io bundle.GraphIO, batchAxes map[string]int) map[string]bool {
	out := map[string]bool{}
	for _, in := range io.Inputs {
		for i, p := range in.Params {
			if p == "" {
				continue
			}
			if ax, ok := batchAxes[in.Name]; (ok && ax == i) || shapes.IsBatchDimName(p) {
				out[p] = true
			}
		}
	}
	return out
}

// batchAxisOf picks an input's batch axis among the axes its min and max
// shapes let vary: the one --batch-axis names; else the first whose ONNX
// dim name means batch; else axis 0 (AITune's and most exporters'
// convention); else none.
func batchAxisOf(in bundle.ValueInfo, lo, hi []int64, flags map[string]int, batchNames map[string]bool) (int, error) {
	varies := func(i int) bool { return i < len(lo) && lo[i] != hi[i] }
	if ax, ok := flags[in.Name]; ok {
		if ax >= len(lo) {
			return 0, fmt.Errorf("--batch-axis %s:%d: the input has rank %d", in.Name, ax, len(lo))
		}
		if !varies(ax) {
			return 0, fmt.Errorf("--batch-axis %s:%d: axis %d is %d in both the min and the max shape; give it a range with --shape %s:MIN..MAX",
				in.Name, ax, ax, lo[ax], in.Name)
		}
		return ax, nil
	}
	for i, p := range in.Params {
		if p != "" && batchNames[p] && varies(i) {
			return i, nil
		}
	}
	if varies(0) {
		return 0, nil
	}
	return shapes.NoBatchAxis, nil
}

// NeedShapesError says which inputs need a --shape, with a suggestion.
// FromONNX tries the suggestion with ONNX Runtime before proposing it
// (Note says how it went).
type NeedShapesError struct {
	Missing   []string // "input [? ?]"
	Suggested []string // "--shape input:1x16..8x16", in the order of Missing
	// Flags are the --shape and --batch-axis flags of the suggestion (with
	// the user's own --shape flags); BatchAxes the suggested batch axes.
	Flags     []string
	BatchAxes map[string]int
	// Other are the dynamic axes the suggestion sets to one size (16) that
	// no name ties to anything: the sizes to look for when it does not run.
	Other []inputAxis
	Note  string
}

type inputAxis struct {
	Input string
	Axis  int
}

func (e *NeedShapesError) Error() string {
	return fmt.Sprintf("%d input(s) have dynamic dims and need --shape NAME:MIN..MAX: %s; e.g. %s%s",
		len(e.Missing), strings.Join(e.Missing, ", "), strings.Join(e.Suggested, " "), e.Note)
}

// suggest fills the suggestion: suggestRange per input, and an unnamed
// dynamic axis of an input whose axis 0 is fixed (a recurrent state
// [2, ?, 128]) follows the batch of the other inputs when they have one,
// with a --batch-axis to say so; every other free axis is listed in Other.
func (e *NeedShapesError) suggest(io bundle.GraphIO, userRanges []string, userAxes map[string]int) {
	given := map[string]bool{}
	for _, r := range userRanges {
		if name, _, _, err := shapes.ParseRange(r); err == nil {
			given[name] = true
		}
	}
	anyBatch := false
	for _, in := range io.Inputs {
		if !given[in.Name] && in.RankKnown() && (slices.ContainsFunc(in.Params, shapes.IsBatchDimName) || len(in.Dims) > 0 && in.Dims[0] < 0) {
			anyBatch = true
		}
	}
	e.Suggested = nil
	e.Flags = append([]string{}, userRanges...)
	for _, in := range io.Inputs {
		if given[in.Name] {
			continue
		}
		if !in.RankKnown() {
			e.Suggested = append(e.Suggested, "--shape "+in.Name+":MIN..MAX")
			continue
		}
		if !slices.ContainsFunc(in.Dims, func(d int64) bool { return d < 0 }) {
			continue
		}
		lo, hi := suggestRange(in)
		batch := slices.IndexFunc(in.Params, shapes.IsBatchDimName)
		if batch < 0 && in.Dims[0] < 0 {
			batch = 0
		}
		if ax, ok := userAxes[in.Name]; ok {
			batch = ax
		}
		flag := ""
		if batch < 0 && anyBatch {
			if ax := slices.IndexFunc(in.Dims, func(d int64) bool { return d < 0 }); ax >= 0 && in.Params[ax] == "" {
				batch = ax
				lo[ax], hi[ax] = 1, 8
				e.BatchAxes[in.Name] = ax
				flag = fmt.Sprintf(" --batch-axis %s:%d", in.Name, ax)
			}
		}
		for i, d := range in.Dims {
			if d < 0 && i != batch && lo[i] == 16 {
				e.Other = append(e.Other, inputAxis{in.Name, i})
			}
		}
		s := fmt.Sprintf("--shape %s:%s..%s", in.Name, shapes.FormatShape(lo), shapes.FormatShape(hi))
		e.Flags = append(e.Flags, strings.TrimPrefix(s, "--shape "))
		e.Suggested = append(e.Suggested, s+flag)
	}
}

// suggestRange proposes a --shape for an input with dynamic dims: the
// batch axis (named batch, or axis 0) from 1 to 8; the spatial axes of an
// image (rank 4 with 1, 3 or 4 channels, NCHW or NHWC) at 224, the size
// ImageNet models are trained at; any other dynamic axis at 16.
func suggestRange(in bundle.ValueInfo) (lo, hi []int64) {
	lo, hi = slices.Clone(in.Dims), slices.Clone(in.Dims)
	batch := slices.IndexFunc(in.Params, shapes.IsBatchDimName)
	if batch < 0 && len(in.Dims) > 0 && in.Dims[0] < 0 {
		batch = 0
	}
	channels := func(i int) bool { return i < len(in.Dims) && (in.Dims[i] == 1 || in.Dims[i] == 3 || in.Dims[i] == 4) }
	spatial := func(i int) bool {
		if len(in.Dims) != 4 {
			return false
		}
		return (channels(1) && (i == 2 || i == 3)) || (!channels(1) && channels(3) && (i == 1 || i == 2))
	}
	for i, d := range in.Dims {
		switch {
		case d >= 0:
		case i == batch:
			lo[i], hi[i] = 1, 8
		case spatial(i):
			lo[i], hi[i] = 224, 224
		default:
			lo[i], hi[i] = 16, 16
		}
	}
	return lo, hi
}

// outputShape is the shape an output will have, when the model's dims say
// it: static dims, and dynamic dims named as an input's dim is (a "batch"
// output axis has the size the "batch" input axis has in this sample). nil
// when some dim is known only to ONNX Runtime.
func outputShape(out bundle.ValueInfo, ins []bundle.ValueInfo, sample []bundle.Tensor) []int64 {
	if !out.RankKnown() {
		return nil
	}
	shape := make([]int64, len(out.Dims))
	for i, d := range out.Dims {
		if d >= 0 {
			shape[i] = d
			continue
		}
		size := int64(-1)
		for k, in := range ins {
			if j := slices.Index(in.Params, out.Params[i]); out.Params[i] != "" && j >= 0 && k < len(sample) && j < len(sample[k].Shape) {
				size = sample[k].Shape[j]
				break
			}
		}
		if size < 0 {
			return nil
		}
		shape[i] = size
	}
	return shape
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
