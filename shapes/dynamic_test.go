package shapes_test

import (
	"encoding/json"
	"testing"

	"github.com/tunefleet/tunefleet/shapes"
)

func TestDynamicShapesValidate(t *testing.T) {
	n := shapes.Dim{Name: "N", Min: 1, Max: 8, Batch: true}
	tests := []struct {
		name string
		ds   shapes.DynamicShapes
		want string
	}{
		{"nil", nil, ""},
		{"static only", shapes.DynamicShapes{"x": {{Size: 3}, {Size: 0}}}, ""},
		{"dynamic", shapes.DynamicShapes{"x": {n, {Size: 3}, {Name: "H", Min: 16, Opt: 32, Max: 64}}}, ""},
		{"opt at the bounds", shapes.DynamicShapes{"x": {{Name: "A", Min: 1, Opt: 1, Max: 2}, {Name: "B", Min: 1, Opt: 2, Max: 2}}}, ""},
		{"same name, same bounds, two inputs", shapes.DynamicShapes{"x": {n}, "y": {n, {Size: 4}}}, ""},
		{"negative static", shapes.DynamicShapes{"x": {{Size: -1}}}, `dynamic_shapes["x"][0]: size -1 is negative`},
		{"zero min", shapes.DynamicShapes{"x": {{Name: "N", Min: 0, Max: 8}}}, `dynamic_shapes["x"][0] (N): min, opt and max must be positive`},
		{"negative max", shapes.DynamicShapes{"x": {{Name: "N", Min: 1, Max: -8}}}, "must be positive"},
		{"negative opt", shapes.DynamicShapes{"x": {{Name: "N", Min: 1, Opt: -2, Max: 8}}}, "must be positive"},
		{"min equals max", shapes.DynamicShapes{"x": {{Size: 2}, {Name: "N", Min: 4, Max: 4}}}, `dynamic_shapes["x"][1] (N): min 4 must be below max 4`},
		{"min above max", shapes.DynamicShapes{"x": {{Name: "N", Min: 5, Max: 4}}}, "min 5 must be below max 4"},
		{"opt below min", shapes.DynamicShapes{"x": {{Name: "N", Min: 2, Opt: 1, Max: 4}}}, "(N): opt 1 is outside [2, 4]"},
		{"opt above max", shapes.DynamicShapes{"x": {{Name: "N", Min: 2, Opt: 5, Max: 4}}}, "(N): opt 5 is outside [2, 4]"},
		{"same name, different max", shapes.DynamicShapes{"x": {n}, "y": {{Name: "N", Min: 1, Max: 16, Batch: true}}},
			`dynamic_shapes["y"][0]: dim "N" is declared twice with different bounds`},
		{"same name, different kind", shapes.DynamicShapes{"x": {n}, "y": {{Name: "N", Min: 1, Max: 8}}}, `dim "N" is declared twice`},
		{"same name twice in one input", shapes.DynamicShapes{"x": {{Name: "S", Min: 1, Max: 8}, {Name: "S", Min: 2, Max: 8}}},
			`dynamic_shapes["x"][1]: dim "S" is declared twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { errSays(t, tt.ds.Validate(), tt.want) })
	}
}

func TestDimJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want shapes.Dim
		out  string // Marshal of the parsed dim
		err  string
	}{
		{name: "static", in: `3`, want: shapes.Dim{Size: 3}, out: `3`},
		{name: "static zero", in: `0`, want: shapes.Dim{}, out: `0`},
		{name: "dynamic", in: `{"name":"H","min":16,"max":64}`, want: shapes.Dim{Name: "H", Min: 16, Max: 64}, out: `{"name":"H","min":16,"max":64}`},
		{name: "batch with opt", in: `{"name":"N","min":1,"opt":4,"max":8,"batch":true}`, want: shapes.Dim{Name: "N", Min: 1, Opt: 4, Max: 8, Batch: true},
			out: `{"name":"N","min":1,"opt":4,"max":8,"batch":true}`},
		{name: "no name", in: `{"min":1,"max":8}`, err: `dynamic dim needs a non-empty "name"`},
		{name: "misspelt key", in: `{"name":"N","min":1,"max":8,"bacth":true}`, err: `unknown field "bacth"`},
		{name: "string", in: `"N"`, err: `dim must be an integer or {"name","min","max","opt","batch"}`},
		{name: "float", in: `1.5`, err: "dim must be an integer"},
		{name: "array", in: `[1]`, err: "dim must be an integer"},
		{name: "wrong field type", in: `{"name":"N","min":"1","max":8}`, err: "dim must be an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d shapes.Dim
			err := json.Unmarshal([]byte(tt.in), &d)
			errSays(t, err, tt.err)
			if tt.err != "" {
				return
			}
			if d != tt.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, d, tt.want)
			}
			b, err := json.Marshal(d)
			if err != nil || string(b) != tt.out {
				t.Errorf("Marshal = %s, %v; want %s", b, err, tt.out)
			}
		})
	}

	if !(shapes.Dim{Size: 2}).IsStatic() || (shapes.Dim{Name: "N"}).IsStatic() {
		t.Error("IsStatic is wrong")
	}
	if o := (shapes.Dim{Name: "N", Min: 1, Max: 8}).OptOrMax(); o != 8 {
		t.Errorf("OptOrMax without opt = %d, want max", o)
	}
	if o := (shapes.Dim{Name: "N", Min: 1, Opt: 3, Max: 8}).OptOrMax(); o != 3 {
		t.Errorf("OptOrMax = %d, want 3", o)
	}
}

func TestDynamicShapesJSON(t *testing.T) {
	in := `{"image":[{"name":"N","min":1,"max":32,"batch":true},3,{"name":"H","min":16,"opt":224,"max":512},224]}`
	var ds shapes.DynamicShapes
	if err := json.Unmarshal([]byte(in), &ds); err != nil {
		t.Fatal(err)
	}
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}
	dims := ds["image"]
	if len(dims) != 4 || !dims[0].Batch || dims[1].Size != 3 || dims[2].OptOrMax() != 224 || dims[3].Size != 224 {
		t.Fatalf("parsed %+v", dims)
	}
	out, err := json.Marshal(ds)
	if err != nil || string(out) != in {
		t.Errorf("Marshal = %s, %v\nwant %s", out, err, in)
	}
}
