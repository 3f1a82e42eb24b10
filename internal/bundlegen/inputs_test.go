package bundlegen

import (
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

func vi(name string, dims []int64, params ...string) bundle.ValueInfo {
	p := make([]string, len(dims))
	copy(p, params)
	return bundle.ValueInfo{Name: name, DType: bundle.Float32, Dims: dims, Params: p}
}

func TestSuggestRange(t *testing.T) {
	tests := []struct {
		name   string
		in     bundle.ValueInfo
		lo, hi string
	}{
		{"NCHW image", vi("x", []int64{-1, 3, -1, -1}, "p2o.0", "", "p2o.1", "p2o.2"), "1x3x224x224", "8x3x224x224"},
		{"NHWC image", vi("x", []int64{-1, -1, -1, 3}), "1x224x224x3", "8x224x224x3"},
		{"OCR line, fixed height", vi("x", []int64{-1, 3, 48, -1}), "1x3x48x224", "8x3x48x224"},
		{"named batch not at 0", vi("h", []int64{2, -1, 64}, "", "batch", ""), "2x1x64", "2x8x64"},
		{"sequence", vi("ids", []int64{-1, -1}, "batch", "seq"), "1x16", "8x16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := suggestRange(tt.in)
			if shapes.FormatShape(lo) != tt.lo || shapes.FormatShape(hi) != tt.hi {
				t.Errorf("suggestRange = %s..%s, want %s..%s", shapes.FormatShape(lo), shapes.FormatShape(hi), tt.lo, tt.hi)
			}
		})
	}
}

func TestBatchAxisOf(t *testing.T) {
	names := map[string]bool{"batch": true, "n_seq": true}
	tests := []struct {
		name   string
		in     bundle.ValueInfo
		lo, hi []int64
		flags  map[string]int
		want   int
	}{
		{"flag wins", vi("s", []int64{2, -1, 3}), []int64{2, 1, 3}, []int64{2, 4, 3}, map[string]int{"s": 1}, 1},
		{"named axis 1", vi("h", []int64{2, -1, 64}, "", "batch"), []int64{2, 1, 64}, []int64{2, 4, 64}, nil, 1},
		{"name shared with another input's batch axis", vi("c", []int64{2, -1}, "", "n_seq"), []int64{2, 1}, []int64{2, 4}, nil, 1},
		{"varying axis 0 by default", vi("x", []int64{-1, -1}, "a", "b"), []int64{1, 16}, []int64{4, 32}, nil, 0},
		{"named but fixed by --shape: none", vi("x", []int64{-1, 3}, "batch"), []int64{2, 3}, []int64{2, 3}, nil, shapes.NoBatchAxis},
		{"scalar", vi("sr", []int64{}), nil, nil, nil, shapes.NoBatchAxis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := batchAxisOf(tt.in, tt.lo, tt.hi, tt.flags, names)
			if err != nil || got != tt.want {
				t.Errorf("batchAxisOf = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestOutputShape(t *testing.T) {
	ins := []bundle.ValueInfo{vi("x", []int64{-1, -1}, "N", "S")}
	sample := []bundle.Tensor{{Name: "x", Shape: []int64{4, 6}}}
	tests := []struct {
		name string
		out  bundle.ValueInfo
		want []int64
	}{
		{"static", vi("s", []int64{2}), []int64{2}},
		{"named like the input's dims", vi("h", []int64{-1, -1, 3}, "N", "S"), []int64{4, 6, 3}},
		{"a dim no input names", vi("y", []int64{-1}, "K"), nil},
		{"unnamed", vi("y", []int64{-1}), nil},
		{"rank unknown", bundle.ValueInfo{Name: "u"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outputShape(tt.out, ins, sample); !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("outputShape = %v, want %v", got, tt.want)
			}
		})
	}
}
