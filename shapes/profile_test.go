package shapes_test

import (
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/shapes"
)

func TestDeriveProfile(t *testing.T) {
	img := spec("image", []any{"batch0", 3, "dim2", "dim3"}, ints(1, 3, 32, 32), ints(16, 3, 256, 256))
	mask := spec("mask", []any{"batch0", 8}, ints(2, 8), ints(4, 8))
	maskOpt := mask
	maskOpt.Opt = ints(3, 8)
	tests := []struct {
		name     string
		inputs   []shapes.TensorSpec
		explicit shapes.DynamicShapes
		want     []shapes.InputProfile
		err      string
	}{
		{
			name:   "recorded bounds, opt defaults to max",
			inputs: []shapes.TensorSpec{img, mask},
			want: []shapes.InputProfile{
				{Name: "image", Min: ints(1, 3, 32, 32), Opt: ints(16, 3, 256, 256), Max: ints(16, 3, 256, 256)},
				{Name: "mask", Min: ints(2, 8), Opt: ints(4, 8), Max: ints(4, 8)},
			},
		},
		{
			name:   "recorded opt",
			inputs: []shapes.TensorSpec{maskOpt},
			want:   []shapes.InputProfile{{Name: "mask", Min: ints(2, 8), Opt: ints(3, 8), Max: ints(4, 8)}},
		},
		{
			name:   "explicit dims override recorded bounds",
			inputs: []shapes.TensorSpec{img, mask},
			explicit: shapes.DynamicShapes{"image": {
				{Name: "N", Min: 1, Max: 64, Batch: true}, {Size: 3}, {Name: "H", Min: 16, Opt: 224, Max: 512}, {Size: 224},
			}},
			want: []shapes.InputProfile{
				{Name: "image", Min: ints(1, 3, 16, 224), Opt: ints(64, 3, 224, 224), Max: ints(64, 3, 512, 224)},
				{Name: "mask", Min: ints(2, 8), Opt: ints(4, 8), Max: ints(4, 8)},
			},
		},
		{
			name:   "explicit dims narrower than recorded",
			inputs: []shapes.TensorSpec{mask},
			explicit: shapes.DynamicShapes{"mask": {
				{Name: "N", Min: 2, Opt: 2, Max: 3, Batch: true}, {Size: 8},
			}},
			want: []shapes.InputProfile{{Name: "mask", Min: ints(2, 8), Opt: ints(2, 8), Max: ints(3, 8)}},
		},
		{name: "no inputs", want: nil},
		{
			name:     "unknown input in dynamic_shapes",
			inputs:   []shapes.TensorSpec{mask},
			explicit: shapes.DynamicShapes{"msk": {{Name: "N", Min: 1, Max: 8}, {Size: 8}}},
			err:      `dynamic_shapes names "msk", which is not an input of the graph`,
		},
		{
			name:     "explicit rank differs",
			inputs:   []shapes.TensorSpec{mask},
			explicit: shapes.DynamicShapes{"mask": {{Name: "N", Min: 1, Max: 8}}},
			err:      `input "mask": dynamic_shapes has 1 dims, the tensor has rank 2`,
		},
		{
			name:     "invalid explicit dims",
			inputs:   []shapes.TensorSpec{mask},
			explicit: shapes.DynamicShapes{"mask": {{Name: "N", Min: 4, Max: 2}, {Size: 8}}},
			err:      "min 4 must be below max 2",
		},
		{
			name:   "invalid spec",
			inputs: []shapes.TensorSpec{spec("x", []any{"batch1"}, ints(1), ints(2))},
			err:    `axis 0 is labelled "batch1"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := shapes.DeriveProfile(tt.inputs, tt.explicit)
			errSays(t, err, tt.err)
			if tt.err != "" {
				return
			}
			if len(p.Inputs) != len(tt.want) {
				t.Fatalf("profile has %d inputs, want %d: %+v", len(p.Inputs), len(tt.want), p)
			}
			for i, w := range tt.want {
				g := p.Inputs[i]
				if g.Name != w.Name || !slices.Equal(g.Min, w.Min) || !slices.Equal(g.Opt, w.Opt) || !slices.Equal(g.Max, w.Max) {
					t.Errorf("input %d = %+v, want %+v", i, g, w)
				}
				if err := g.Contains(g.Opt); err != nil {
					t.Errorf("a profile does not contain its own opt: %v", err)
				}
			}
		})
	}
}

func TestDeriveProfileCopies(t *testing.T) {
	in := spec("x", []any{"batch0"}, ints(1), ints(8))
	p, err := shapes.DeriveProfile([]shapes.TensorSpec{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Inputs[0].Min[0], p.Inputs[0].Opt[0] = 5, 5
	if in.Min[0] != 1 || in.Max[0] != 8 {
		t.Errorf("changing the profile changed the spec: %+v", in)
	}
}

func TestProfileInputContains(t *testing.T) {
	p := shapes.Profile{Inputs: []shapes.InputProfile{
		{Name: "a", Min: ints(1, 8), Opt: ints(4, 8), Max: ints(16, 8)},
		{Name: "s", Min: ints(), Opt: ints(), Max: ints()},
	}}
	a, ok := p.Input("a")
	if !ok || a.Name != "a" {
		t.Fatalf("Input(a) = %+v, %v", a, ok)
	}
	if _, ok := p.Input("b"); ok {
		t.Error("Input(b) found an input")
	}
	s, _ := p.Input("s")
	tests := []struct {
		name  string
		ip    shapes.InputProfile
		shape []int64
		want  string
	}{
		{"min", a, ints(1, 8), ""},
		{"max", a, ints(16, 8), ""},
		{"scalar", s, ints(), ""},
		{"rank", a, ints(1), `input "a": rank 1, profile has rank 2`},
		{"below", a, ints(0, 8), `input "a": axis 0 size 0 is outside the profile's [1, 16] (shape 0x8, profile min 1x8 max 16x8)`},
		{"above", a, ints(4, 9), "axis 1 size 9 is outside the profile's [8, 8]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { errSays(t, tt.ip.Contains(tt.shape), tt.want) })
	}
}
