package shapes_test

import (
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/shapes"
)

func TestDefaultBatchSizes(t *testing.T) {
	got := shapes.DefaultBatchSizes()
	if len(got) != 21 || got[0] != 1 || got[1] != 2 || got[20] != 1<<20 || !slices.IsSorted(got) {
		t.Errorf("DefaultBatchSizes() = %v", got)
	}
	got[0] = 99
	if shapes.DefaultBatchSizes()[0] != 1 {
		t.Error("DefaultBatchSizes returns a shared slice")
	}
}

func TestBatchAxes(t *testing.T) {
	s := spec("x", []any{"batch0", 3, "dim2", "batch3"}, ints(1, 3, 1, 2), ints(8, 3, 9, 16))
	if got := s.BatchAxes(); !slices.Equal(got, []int{0, 3}) {
		t.Errorf("BatchAxes = %v", got)
	}
	if got := s.BatchShape(ints(1, 3, 5, 2), 6); !slices.Equal(got, ints(6, 3, 5, 6)) {
		t.Errorf("BatchShape = %v", got)
	}
	static := spec("y", []any{2, "dim1"}, ints(2, 1), ints(2, 4))
	if got := static.BatchAxes(); got != nil {
		t.Errorf("BatchAxes of a spec without batch = %v", got)
	}
	in := ints(2, 3)
	if got := static.BatchShape(in, 9); !slices.Equal(got, in) {
		t.Errorf("BatchShape without a batch axis = %v", got)
	}
	got := static.BatchShape(in, 9)
	got[0] = 7
	if in[0] != 2 {
		t.Error("BatchShape changed its argument")
	}
}

func TestBatching(t *testing.T) {
	batched := func(name string, hi int64) shapes.TensorSpec {
		return spec(name, []any{"batch0", 4}, ints(1, 4), ints(hi, 4))
	}
	static := spec("w", []any{4, 4}, ints(4, 4), ints(4, 4))
	from4 := spec("c", []any{"batch0", 4}, ints(4, 4), ints(64, 4))
	secondAxis := spec("t", []any{3, "batch1"}, ints(3, 1), ints(3, 24))
	defaults := shapes.DefaultBatchSizes()
	tests := []struct {
		name       string
		inputs     []shapes.TensorSpec
		explicit   shapes.DynamicShapes
		candidates []int
		hasBatch   bool // some input has a batch axis
		maxBS      int
		sizes      []int
	}{
		{name: "one batched input", inputs: []shapes.TensorSpec{batched("a", 8)}, candidates: defaults,
			hasBatch: true, maxBS: 8, sizes: []int{1, 2, 4, 8}},
		{name: "max between powers of two", inputs: []shapes.TensorSpec{batched("a", 6)}, candidates: defaults,
			hasBatch: true, maxBS: 6, sizes: []int{1, 2, 4}},
		{name: "max is what every input accepts", inputs: []shapes.TensorSpec{batched("a", 3), batched("b", 17)}, candidates: defaults,
			hasBatch: true, maxBS: 3, sizes: []int{1, 2}},
		{name: "batch axis not at 0", inputs: []shapes.TensorSpec{secondAxis}, candidates: defaults,
			hasBatch: true, maxBS: 24, sizes: []int{1, 2, 4, 8, 16}},
		{name: "max batch 1", inputs: []shapes.TensorSpec{batched("a", 1)}, candidates: defaults,
			hasBatch: true, maxBS: 1, sizes: nil},
		// A scalar such as a sample rate beside a batched tensor keeps its
		// value at every batch size; it does not turn the sweep off.
		{name: "an input without batch axis", inputs: []shapes.TensorSpec{batched("a", 8), static}, candidates: defaults,
			hasBatch: true, maxBS: 8, sizes: []int{1, 2, 4, 8}},
		{name: "a scalar input beside a batch axis not at 0", inputs: []shapes.TensorSpec{batched("a", 4), spec("sr", nil, ints(), ints()), secondAxis}, candidates: defaults,
			hasBatch: true, maxBS: 4, sizes: []int{1, 2, 4}},
		{name: "no batch axis at all", inputs: []shapes.TensorSpec{static}, candidates: defaults,
			hasBatch: false, maxBS: 1, sizes: nil},
		{name: "no inputs", inputs: nil, candidates: defaults, hasBatch: false, maxBS: 1, sizes: nil},
		{name: "no candidate small enough", inputs: []shapes.TensorSpec{batched("a", 8)}, candidates: []int{16, 32},
			hasBatch: true, maxBS: 8, sizes: []int{8}},
		{name: "no candidates", inputs: []shapes.TensorSpec{batched("a", 8)}, candidates: nil,
			hasBatch: true, maxBS: 8, sizes: []int{8}},
		{name: "candidates unsorted, repeated, non-positive", inputs: []shapes.TensorSpec{batched("a", 8)}, candidates: []int{4, 0, 1, -2, 4, 8, 9, 2},
			hasBatch: true, maxBS: 8, sizes: []int{1, 2, 4, 8}},
		{name: "explicit batch dim raises the max", inputs: []shapes.TensorSpec{batched("a", 8)},
			explicit:   shapes.DynamicShapes{"a": {{Name: "N", Min: 1, Max: 100, Batch: true}, {Size: 4}}},
			candidates: defaults, hasBatch: true, maxBS: 100, sizes: []int{1, 2, 4, 8, 16, 32, 64}},
		{name: "explicit batch dim lowers the max", inputs: []shapes.TensorSpec{batched("a", 64)},
			explicit:   shapes.DynamicShapes{"a": {{Name: "N", Min: 1, Max: 3, Batch: true}, {Size: 4}}},
			candidates: defaults, hasBatch: true, maxBS: 3, sizes: []int{1, 2}},
		{name: "explicit non-batch dim is ignored", inputs: []shapes.TensorSpec{batched("a", 8)},
			explicit:   shapes.DynamicShapes{"a": {{Name: "S", Min: 1, Max: 100}, {Size: 4}}},
			candidates: defaults, hasBatch: true, maxBS: 8, sizes: []int{1, 2, 4, 8}},
		{name: "explicit dims of another input", inputs: []shapes.TensorSpec{batched("a", 8)},
			explicit:   shapes.DynamicShapes{"b": {{Name: "N", Min: 1, Max: 100, Batch: true}}},
			candidates: defaults, hasBatch: true, maxBS: 8, sizes: []int{1, 2, 4, 8}},
		{name: "declared min above 1", inputs: []shapes.TensorSpec{from4}, candidates: defaults,
			hasBatch: true, maxBS: 64, sizes: []int{4, 8, 16, 32, 64}},
		{name: "min over inputs is the largest", inputs: []shapes.TensorSpec{batched("a", 64), from4}, candidates: defaults,
			hasBatch: true, maxBS: 64, sizes: []int{4, 8, 16, 32, 64}},
		{name: "explicit batch dim raises the min", inputs: []shapes.TensorSpec{batched("a", 64)},
			explicit:   shapes.DynamicShapes{"a": {{Name: "N", Min: 3, Max: 64, Batch: true}, {Size: 4}}},
			candidates: defaults, hasBatch: true, maxBS: 64, sizes: []int{4, 8, 16, 32, 64}},
		{name: "no candidate between min and max", inputs: []shapes.TensorSpec{spec("d", []any{"batch0"}, ints(5), ints(7))}, candidates: defaults,
			hasBatch: true, maxBS: 7, sizes: []int{7}},
		{name: "explicit batch dim on an input without batch axis", inputs: []shapes.TensorSpec{batched("a", 8), static},
			explicit:   shapes.DynamicShapes{"a": {{Name: "N", Min: 1, Max: 32, Batch: true}, {Size: 4}}},
			candidates: defaults, hasBatch: true, maxBS: 32, sizes: []int{1, 2, 4, 8, 16, 32}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shapes.AnyBatchAxis(tt.inputs); got != tt.hasBatch {
				t.Errorf("AnyBatchAxis = %v, want %v", got, tt.hasBatch)
			}
			if got := shapes.MaxBatchSize(tt.inputs, tt.explicit); got != tt.maxBS {
				t.Errorf("MaxBatchSize = %d, want %d", got, tt.maxBS)
			}
			if got := shapes.BatchSizes(tt.inputs, tt.explicit, tt.candidates); !slices.Equal(got, tt.sizes) {
				t.Errorf("BatchSizes = %v, want %v", got, tt.sizes)
			}
			// No sweep always comes with its reason, and a sweep with none.
			if why := shapes.NoSweepReason(tt.inputs, tt.explicit); (why == "") != (tt.sizes != nil) {
				t.Errorf("NoSweepReason = %q with BatchSizes %v", why, tt.sizes)
			}
		})
	}
}

func TestSpecWithBatchAxis(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi []int64
		axis   int
		want   []shapes.Axis
	}{
		{"state [2 N 64]", ints(2, 1, 64), ints(2, 8, 64), 1, []shapes.Axis{shapes.Static(2), shapes.BatchAxis(1), shapes.Static(64)}},
		{"axis 0", ints(1, 3), ints(8, 3), 0, []shapes.Axis{shapes.BatchAxis(0), shapes.Static(3)}},
		{"none", ints(1, 3), ints(8, 3), shapes.NoBatchAxis, []shapes.Axis{shapes.DynAxis(0), shapes.Static(3)}},
		{"static batch axis stays static", ints(2, 4), ints(2, 4), 1, []shapes.Axis{shapes.Static(2), shapes.Static(4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := shapes.SpecWithBatchAxis("in", tt.lo, tt.hi, tt.axis)
			if !slices.Equal(s.Shape, tt.want) {
				t.Fatalf("shape %v, want %v", s.Shape, tt.want)
			}
			if err := shapes.ValidateSpec(s); err != nil {
				t.Errorf("invalid spec: %v", err)
			}
		})
	}
}

func TestIsBatchDimName(t *testing.T) {
	for _, n := range []string{"batch", "N", "batch_size", "Batch", "B", "bs"} {
		if !shapes.IsBatchDimName(n) {
			t.Errorf("IsBatchDimName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "sequence", "height", "p2o.DynamicDimension.0", "num_channels"} {
		if shapes.IsBatchDimName(n) {
			t.Errorf("IsBatchDimName(%q) = true", n)
		}
	}
}

func TestParseBatchAxis(t *testing.T) {
	if n, ax, err := shapes.ParseBatchAxis("a:b:1"); err != nil || n != "a:b" || ax != 1 {
		t.Errorf("ParseBatchAxis(a:b:1) = %q %d %v", n, ax, err)
	}
	for _, bad := range []string{"state", ":1", "state:-1", "state:x", "state:"} {
		if _, _, err := shapes.ParseBatchAxis(bad); err == nil {
			t.Errorf("ParseBatchAxis(%q) accepted", bad)
		}
	}
}
