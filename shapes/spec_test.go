package shapes_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/shapes"
)

// spec builds a TensorSpec from JSON-like axes: an int is static, a string a
// label.
func spec(name string, axes []any, lo, hi []int64) shapes.TensorSpec {
	t := shapes.TensorSpec{Name: name, Min: lo, Max: hi, Shape: []shapes.Axis{}}
	for _, a := range axes {
		switch v := a.(type) {
		case int:
			t.Shape = append(t.Shape, shapes.Static(int64(v)))
		case string:
			t.Shape = append(t.Shape, shapes.Axis{Label: v})
		}
	}
	return t
}

func ints(v ...int64) []int64 { return v }

func errSays(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one saying %q", err, want)
	}
}

func TestValidateSpec(t *testing.T) {
	withOpt := func(s shapes.TensorSpec, opt ...int64) shapes.TensorSpec { s.Opt = opt; return s }
	tests := []struct {
		name string
		spec shapes.TensorSpec
		want string
	}{
		{"scalar", spec("x", nil, ints(), ints()), ""},
		{"static", spec("x", []any{3, 224}, ints(3, 224), ints(3, 224)), ""},
		{"static zero", spec("x", []any{0}, ints(0), ints(0)), ""},
		{"batch and dim", spec("x", []any{"batch0", 3, "dim2"}, ints(1, 3, 16), ints(32, 3, 64)), ""},
		{"label with equal bounds", spec("x", []any{"batch0"}, ints(4), ints(4)), ""},
		{"batch not at axis 0", spec("x", []any{2, "batch1"}, ints(2, 1), ints(2, 8)), ""},
		{"two-digit index", spec("x", []any{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "dim10"}, ints(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), ints(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9)), ""},
		{"opt inside", withOpt(spec("x", []any{"batch0", 3}, ints(1, 3), ints(8, 3)), 4, 3), ""},
		{"min_shape rank", spec("x", []any{"batch0", 3}, ints(1), ints(8, 3)), `tensor "x": shape has rank 2 but min_shape has 1 and max_shape 2`},
		{"max_shape rank", spec("x", []any{"batch0", 3}, ints(1, 3), ints(8, 3, 1)), "max_shape 3"},
		{"opt rank", withOpt(spec("x", []any{"batch0", 3}, ints(1, 3), ints(8, 3)), 4), `opt_shape has rank 1, want 2`},
		{"negative min", spec("x", []any{"dim0"}, ints(-1), ints(8)), "axis 0 has min -1 and max 8"},
		{"min above max", spec("x", []any{"dim0"}, ints(9), ints(8)), "axis 0 has min 9 and max 8 (want 0 ≤ min ≤ max)"},
		{"opt below min", withOpt(spec("x", []any{"batch0"}, ints(2), ints(8)), 1), "axis 0 opt 1 is outside [2, 8]"},
		{"opt above max", withOpt(spec("x", []any{"batch0"}, ints(2), ints(8)), 9), "axis 0 opt 9 is outside [2, 8]"},
		{"static min differs", spec("x", []any{3}, ints(2), ints(3)), "static axis 0 of size 3 has min 2 and max 3"},
		{"static max differs", spec("x", []any{"batch0", 4}, ints(1, 4), ints(8, 5)), "static axis 1 of size 4 has min 4 and max 5"},
		{"batch1 at axis 0", spec("x", []any{"batch1", 3}, ints(1, 3), ints(8, 3)), `axis 0 is labelled "batch1"; labels carry their own axis index ("batch0")`},
		{"dim0 at axis 1", spec("x", []any{3, "dim0"}, ints(3, 1), ints(3, 8)), `axis 1 is labelled "dim0"; labels carry their own axis index ("dim1")`},
		{"label without index", spec("x", []any{"batch"}, ints(1), ints(8)), `axis 0 label "batch" is not "batch0" or "dim0"`},
		{"label with leading zero", spec("x", []any{"batch00"}, ints(1), ints(8)), `label "batch00" is not`},
		{"label with sign", spec("x", []any{"dim+0"}, ints(1), ints(8)), `label "dim+0" is not`},
		{"label with negative index", spec("x", []any{"dim-0"}, ints(1), ints(8)), `label "dim-0" is not`},
		{"unknown label", spec("x", []any{"seq0"}, ints(1), ints(8)), `label "seq0" is not`},
		{"label with suffix", spec("x", []any{"batch0x"}, ints(1), ints(8)), `label "batch0x" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { errSays(t, shapes.ValidateSpec(tt.spec), tt.want) })
	}
}

func TestFits(t *testing.T) {
	s := spec("x", []any{"batch0", 3, "dim2"}, ints(1, 3, 16), ints(8, 3, 64))
	tests := []struct {
		name  string
		spec  shapes.TensorSpec
		shape []int64
		want  string
	}{
		{"min", s, ints(1, 3, 16), ""},
		{"max", s, ints(8, 3, 64), ""},
		{"inside", s, ints(5, 3, 20), ""},
		{"scalar", spec("s", nil, ints(), ints()), ints(), ""},
		{"rank too small", s, ints(1, 3), `tensor "x": sample has rank 2 (shape 1x3), the spec has rank 3`},
		{"rank too large", s, ints(1, 3, 16, 1), "sample has rank 4"},
		{"scalar for a tensor", s, ints(), "sample has rank 0 (shape scalar)"},
		{"batch too large", s, ints(9, 3, 16), `tensor "x": sample axis 0 is 9, outside the spec's [1, 8] (sample shape 9x3x16)`},
		{"dim too small", s, ints(1, 3, 15), "sample axis 2 is 15, outside the spec's [16, 64]"},
		{"static differs", s, ints(1, 4, 16), "sample axis 1 is 4, outside the spec's [3, 3]"},
		{"zero batch", s, ints(0, 3, 16), "sample axis 0 is 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { errSays(t, tt.spec.Fits(tt.shape), tt.want) })
	}
}

func TestAxisJSON(t *testing.T) {
	axes := []shapes.Axis{shapes.Static(3), shapes.BatchAxis(0), shapes.DynAxis(2), shapes.Static(0)}
	b, err := json.Marshal(axes)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `[3,"batch0","dim2",0]` {
		t.Errorf("Marshal = %s", b)
	}
	var back []shapes.Axis
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, axes) {
		t.Errorf("round trip = %v, want %v", back, axes)
	}
	var strs []string
	for _, a := range axes {
		strs = append(strs, a.String())
	}
	if got := strings.Join(strs, ","); got != "3,batch0,dim2,0" {
		t.Errorf("String() = %s", got)
	}
	if !shapes.BatchAxis(1).IsBatch() || shapes.DynAxis(0).IsBatch() || shapes.Static(1).IsBatch() ||
		!shapes.Static(1).IsStatic() || shapes.DynAxis(0).IsStatic() {
		t.Error("IsBatch/IsStatic are wrong")
	}

	for _, bad := range []struct{ in, want string }{
		{`-1`, "axis size -1 is negative"},
		{`1.5`, "axis must be an integer or a label"},
		{`true`, "axis must be an integer or a label"},
		{`{}`, "axis must be an integer or a label"},
		{`[1]`, "axis must be an integer or a label"},
		{`""`, "axis label is empty"},
	} {
		var a shapes.Axis
		errSays(t, json.Unmarshal([]byte(bad.in), &a), bad.want)
	}
}

func TestTensorSpecJSON(t *testing.T) {
	s := spec("input:0", []any{"batch0", 3}, ints(1, 3), ints(8, 3))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"input:0","shape":["batch0",3],"min_shape":[1,3],"max_shape":[8,3]}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	s.Opt = ints(4, 3)
	b, _ = json.Marshal(s)
	var back shapes.TensorSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != s.Name || !slices.Equal(back.Shape, s.Shape) || !slices.Equal(back.Min, s.Min) ||
		!slices.Equal(back.Max, s.Max) || !slices.Equal(back.Opt, s.Opt) {
		t.Errorf("round trip = %+v, want %+v", back, s)
	}
}

func TestFormatParseShape(t *testing.T) {
	tests := []struct {
		in   string
		want []int64
		err  string
	}{
		{"1x3x224x224", ints(1, 3, 224, 224), ""},
		{"7", ints(7), ""},
		{"0x4", ints(0, 4), ""},
		{"scalar", ints(), ""},
		{"", nil, "empty shape"},
		{"1xx2", nil, `"" is not a non-negative integer`},
		{"1x-2", nil, `"-2" is not a non-negative integer`},
		{"1X2", nil, `"1X2" is not`},
		{"1x2x", nil, `"" is not`},
		{" 1", nil, `" 1" is not`},
		{"a", nil, `"a" is not`},
		{"1.5", nil, `"1.5" is not`},
		{"99999999999999999999", nil, "is not a non-negative integer"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := shapes.ParseShape(tt.in)
			errSays(t, err, tt.err)
			if tt.err != "" {
				return
			}
			if !slices.Equal(got, tt.want) || got == nil {
				t.Fatalf("ParseShape(%q) = %#v, want %v", tt.in, got, tt.want)
			}
			if f := shapes.FormatShape(got); f != tt.in {
				t.Errorf("FormatShape(%v) = %q, want %q", got, f, tt.in)
			}
		})
	}
	if got := shapes.FormatShape(nil); got != "scalar" {
		t.Errorf("FormatShape(nil) = %q", got)
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		in     string
		name   string
		lo, hi []int64
		err    string
	}{
		{"input:1x64..32x64", "input", ints(1, 64), ints(32, 64), ""},
		{"input:1x3x224x224", "input", ints(1, 3, 224, 224), ints(1, 3, 224, 224), ""},
		{"x:scalar", "x", ints(), ints(), ""},
		{"x:scalar..scalar", "x", ints(), ints(), ""},
		{"ns:sub:input:1..4", "ns:sub:input", ints(1), ints(4), ""},
		{"input_ids:0:2x8..2x8", "input_ids:0", ints(2, 8), ints(2, 8), ""},
		{"x:4..4", "x", ints(4), ints(4), ""},
		{"input", "", nil, nil, "want NAME:MIN..MAX"},
		{":1x2", "", nil, nil, "want NAME:MIN..MAX"},
		{"", "", nil, nil, "want NAME:MIN..MAX"},
		{"x:", "", nil, nil, "empty shape"},
		{"x:1x2..", "", nil, nil, "empty shape"},
		{"x:..3", "", nil, nil, "empty shape"},
		{"x:1x2..3", "", nil, nil, `shape "x:1x2..3": min has rank 2, max has rank 1`},
		{"x:4x1..2x1", "", nil, nil, "axis 0 min 4 is above max 2"},
		{"x:a..b", "", nil, nil, `"a" is not a non-negative integer`},
		{"x:1..2..3", "", nil, nil, `"2..3" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, lo, hi, err := shapes.ParseRange(tt.in)
			errSays(t, err, tt.err)
			if tt.err != "" {
				return
			}
			if name != tt.name || !slices.Equal(lo, tt.lo) || !slices.Equal(hi, tt.hi) {
				t.Errorf("ParseRange(%q) = %q %v %v, want %q %v %v", tt.in, name, lo, hi, tt.name, tt.lo, tt.hi)
			}
		})
	}
}

func TestSpecFromRange(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi []int64
		batch  bool
		want   []shapes.Axis
	}{
		{"batch", ints(1, 3, 224), ints(8, 3, 448), true, []shapes.Axis{shapes.BatchAxis(0), shapes.Static(3), shapes.DynAxis(2)}},
		{"no batch", ints(1, 3, 224), ints(8, 3, 448), false, []shapes.Axis{shapes.DynAxis(0), shapes.Static(3), shapes.DynAxis(2)}},
		{"static", ints(2, 3), ints(2, 3), true, []shapes.Axis{shapes.Static(2), shapes.Static(3)}},
		{"varying axis 1 is never batch", ints(3, 1), ints(3, 8), true, []shapes.Axis{shapes.Static(3), shapes.DynAxis(1)}},
		{"scalar", ints(), ints(), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := shapes.SpecFromRange("in", tt.lo, tt.hi, tt.batch)
			if s.Name != "in" || !slices.Equal(s.Shape, tt.want) || !slices.Equal(s.Min, tt.lo) || !slices.Equal(s.Max, tt.hi) {
				t.Fatalf("SpecFromRange = %+v, want shape %v", s, tt.want)
			}
			if err := shapes.ValidateSpec(s); err != nil {
				t.Errorf("SpecFromRange made an invalid spec: %v", err)
			}
			if len(tt.lo) > 0 {
				tt.lo[0] = 99 // the spec owns its slices
				if s.Min[0] == 99 {
					t.Error("SpecFromRange shares its min slice with the caller")
				}
			}
		})
	}
}
