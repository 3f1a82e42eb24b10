package bundle_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/shapes"
)

// Paths inside the default bundletest bundle (one MLP graph "0", samples of
// batch 1 and 4, batch axis declared [1, 8]).
var (
	onnx0   = bundletest.ONNXPath("0")
	sample0 = bundletest.SamplePath("0", 0)
	sample1 = bundletest.SamplePath("0", 1)
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// editRaw rewrites bundle.json's text; it fails the test when edit changes
// nothing, so a case cannot silently test the valid bundle.
func editRaw(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, bundle.ManifestName)
	before := string(readFile(t, p))
	after := edit(before)
	if after == before {
		t.Fatal("editRaw: the edit changed nothing")
	}
	writeFile(t, p, []byte(after))
}

func edit(f func(m *bundle.Manifest)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		bundletest.EditManifest(t, dir, f)
	}
}

// moveOut moves a bundle path to a directory outside the bundle and puts a
// symbolic link to it in its place.
func moveOut(t *testing.T, dir, rel string) {
	t.Helper()
	outside := filepath.Join(t.TempDir(), filepath.Base(rel))
	if err := os.Rename(filepath.Join(dir, rel), outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}

func writeTensor(t *testing.T, path string, tensor bundle.Tensor) {
	t.Helper()
	b, err := bundle.EncodeTensorProto(tensor)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

func mustOpen(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return b
}

func f64(v float64) *float64 { return &v }

func TestOpenRejectsMalformedBundles(t *testing.T) {
	tests := []struct {
		name  string
		opts  []bundletest.Option
		brk   func(t *testing.T, dir string)
		want  []string // substrings of the error
		valid bool     // the error is not an *InvalidError
	}{
		{
			name: "missing bundle.json",
			brk:  func(t *testing.T, dir string) { remove(t, filepath.Join(dir, bundle.ManifestName)) },
			want: []string{"no bundle.json at its root"},
		},
		{
			name: "bundle.json is not JSON",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, bundle.ManifestName), []byte("format: tunefleet.bundle/v1\n"))
			},
			want: []string{"bundle.json: invalid character"},
		},
		{
			name: "bundle.json is empty",
			brk:  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, bundle.ManifestName), nil) },
			want: []string{"bundle.json: EOF"},
		},
		{
			name: "data after the JSON object",
			brk: func(t *testing.T, dir string) {
				editRaw(t, dir, func(s string) string { return s + "{}\n" })
			},
			want: []string{"unexpected data after the JSON object"},
		},
		{
			name: "misspelt key",
			brk: func(t *testing.T, dir string) {
				editRaw(t, dir, func(s string) string { return strings.Replace(s, `"samples"`, `"sample"`, 1) })
			},
			want: []string{`bundle.json: graphs[0].sample: unknown field (want one of name, onnx, inputs, outputs, samples, tolerances, external_data)`, `bundle.json: graphs[0]: samples is missing`},
		},
		{
			name: "misspelt key in a dynamic_shapes dim",
			brk: func(t *testing.T, dir string) {
				editRaw(t, dir, func(s string) string {
					return strings.Replace(s, `"graphs"`, `"dynamic_shapes": {"input": [{"name": "N", "min": 1, "max": 8, "bacth": true}, 4]}, "graphs"`, 1)
				})
			},
			want: []string{`bundle.json: dynamic_shapes.input[0].bacth: unknown field (want one of name, min, max, opt, batch)`},
		},
		{
			name: "empty axis label",
			brk: func(t *testing.T, dir string) {
				editRaw(t, dir, func(s string) string { return strings.Replace(s, `"batch0"`, `""`, 1) })
			},
			want: []string{`bundle.json: graphs[0].inputs[0].shape[0]: is ""; want a static size, or a label "batch<i>"`},
		},
		{
			name: "wrong format string",
			brk:  edit(func(m *bundle.Manifest) { m.Format = "tunefleet.bundle/v2" }),
			want: []string{`bundle.json: format: is "tunefleet.bundle/v2", want "tunefleet.bundle/v1"`},
		},
		{
			name: "model name with a slash",
			brk:  edit(func(m *bundle.Manifest) { m.Model = "pkg/Model" }),
			want: []string{`bundle.json: model: is "pkg/Model"; want at most 200 bytes of letters, digits and ._-()`},
		},
		{
			name: "empty model name",
			brk:  edit(func(m *bundle.Manifest) { m.Model = "" }),
			want: []string{`bundle.json: model: is ""; want`},
		},
		{
			name: "empty graph list",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs = nil }),
			want: []string{"graphs is empty"},
		},
		{
			name: "duplicate graph names",
			opts: []bundletest.Option{bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs)},
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[1].Name = "0" }),
			want: []string{`graph "0": name is used twice`},
		},
		{
			name: "graph names that export as one directory",
			opts: []bundletest.Option{bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs)},
			brk:  edit(func(m *bundle.Manifest) { m.Model = "collide"; m.Graphs[0].Name = "a.b"; m.Graphs[1].Name = "a_b" }),
			want: []string{`graphs "a.b", "a_b" all export as the directory (and Triton model) "collide_a_b"`},
		},
		{
			name: "model and graph names too long for one directory",
			brk: edit(func(m *bundle.Manifest) {
				m.Model = strings.Repeat("m", 199)
				m.Graphs[0].Name = strings.Repeat("g", 199)
			}),
			want: []string{`graph "` + strings.Repeat("g", 199) + `": exported as the directory (and Triton model) "mmmm`, "399 bytes, more than a directory name's 255: shorten the model or the graph name"},
		},
		{
			name: "graph name that is a path",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Name = "../0" }),
			want: []string{`bundle.json: graphs[0].name: is "../0"; want`},
		},
		{
			name: "missing ONNX file",
			brk:  func(t *testing.T, dir string) { remove(t, filepath.Join(dir, onnx0)) },
			want: []string{`graph "0": onnx: path "0/model.onnx" does not exist in the bundle`},
		},
		{
			name: "ONNX path escaping with ..",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].ONNX = "../bundle/" + onnx0 }),
			want: []string{`path "../bundle/0/model.onnx" escapes the bundle`},
		},
		{
			name: "ONNX path with .. in the middle",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].ONNX = "0/../" + onnx0 }),
			want: []string{"escapes the bundle"},
		},
		{
			name: "absolute ONNX path",
			brk: func(t *testing.T, dir string) {
				abs := filepath.Join(dir, onnx0)
				bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].ONNX = abs })
			},
			want: []string{"is absolute"},
		},
		{
			name: "ONNX path with a backslash",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].ONNX = `0\model.onnx` }),
			want: []string{"backslash"},
		},
		{
			name: "ONNX file is a symbolic link out of the bundle",
			brk:  func(t *testing.T, dir string) { moveOut(t, dir, onnx0) },
			want: []string{`path "0/model.onnx" leads outside the bundle`},
		},
		{
			name: "sample directory is a symbolic link out of the bundle",
			brk:  func(t *testing.T, dir string) { moveOut(t, dir, sample0) },
			want: []string{`sample "0/test_data_set_0"`, "leads outside the bundle"},
		},
		{
			name: "sample file is a symbolic link out of the bundle",
			brk:  func(t *testing.T, dir string) { moveOut(t, dir, sample0+"/input_0.pb") },
			want: []string{`sample "0/test_data_set_0"`, "input_0.pb", "leads outside the bundle"},
		},
		{
			name: "sample path escaping with ..",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Samples[0] = "../bundle/" + sample0 }),
			want: []string{`sample "../bundle/0/test_data_set_0"`, "escapes the bundle"},
		},
		{
			name: "absolute sample path",
			brk: func(t *testing.T, dir string) {
				abs := filepath.Join(dir, sample0)
				bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].Samples[0] = abs })
			},
			want: []string{"is absolute"},
		},
		{
			name: "model file of random bytes",
			brk: func(t *testing.T, dir string) {
				r := rand.New(rand.NewPCG(1, 2))
				b := make([]byte, 4096)
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				writeFile(t, filepath.Join(dir, onnx0), b)
			},
			want: []string{`graph "0": onnx "0/model.onnx": not an ONNX model`},
		},
		{
			name: "model file that is text",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, onnx0), []byte("this is a README, not a model\n"))
			},
			want: []string{`onnx "0/model.onnx": not an ONNX model`},
		},
		{
			name: "model file that is a sample",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, onnx0), readFile(t, filepath.Join(dir, sample0, "input_0.pb")))
			},
			want: []string{`onnx "0/model.onnx": not an ONNX model`},
		},
		{
			name: "empty model file",
			brk:  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, onnx0), nil) },
			want: []string{"not an ONNX model"},
		},
		{
			name: "dtype differs from the ONNX graph",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].DType = bundle.Float16 }),
			want: []string{`input "input" is declared float16, the ONNX graph says float32`},
		},
		{
			name: "output dtype differs from the ONNX graph",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Outputs[0].DType = bundle.Int64 }),
			want: []string{`output "output" is declared int64, the ONNX graph says float32`},
		},
		{
			name: "unknown dtype",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].DType = "float" }),
			want: []string{`bundle.json: graphs[0].inputs[0].dtype: is "float", want "float32", "float16"`},
		},
		{
			name: "rank differs from the ONNX graph",
			brk: edit(func(m *bundle.Manifest) {
				in := &m.Graphs[0].Inputs[0]
				in.Shape = append(in.Shape, shapes.Static(1))
				in.Min = append(in.Min, 1)
				in.Max = append(in.Max, 1)
			}),
			want: []string{`input "input" is declared with rank 3, the ONNX graph says rank 2`},
		},
		{
			name: "static size differs from the ONNX graph",
			brk: edit(func(m *bundle.Manifest) {
				in := &m.Graphs[0].Inputs[0]
				in.Shape[1], in.Min[1], in.Max[1] = shapes.Static(5), 5, 5
			}),
			want: []string{`input "input" axis 1 is 4 in the ONNX graph, but declared [5, 5]`},
		},
		{
			name: "input with the wrong name",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Name = "x" }),
			want: []string{`input 0 is "x", the ONNX graph's input 0 is "input"`},
		},
		{
			name: "inputs in the wrong order",
			opts: []bundletest.Option{bundletest.WithGraphs(bundletest.TwoInputs)},
			brk: edit(func(m *bundle.Manifest) {
				in := m.Graphs[0].Inputs
				in[0], in[1] = in[1], in[0]
			}),
			want: []string{`input 0 is "mask", the ONNX graph's input 0 is "a" (declare them in the graph's order)`},
		},
		{
			name: "an input not declared",
			opts: []bundletest.Option{bundletest.WithGraphs(bundletest.TwoInputs)},
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs = m.Graphs[0].Inputs[:1] }),
			want: []string{"declares 1 inputs [a], the ONNX graph has 2 [a mask]"},
		},
		{
			name: "no outputs declared",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Outputs = nil }),
			want: []string{"no outputs declared"},
		},
		{
			name: "tensor declared twice",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Outputs[0].Name = "input" }),
			want: []string{`tensor "input" is declared twice`},
		},
		{
			name: "sample outside its declared shape range",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Max[0] = 2 }),
			want: []string{`sample "0/test_data_set_1": input_0.pb: tensor "input": sample axis 0 is 4, outside the spec's [1, 2]`},
		},
		{
			name: "sample of the wrong rank",
			brk: func(t *testing.T, dir string) {
				writeTensor(t, filepath.Join(dir, sample0, "input_0.pb"), bundletest.Float32s("input", []int64{4}, 1))
			},
			want: []string{`input_0.pb: tensor "input": sample has rank 1`},
		},
		{
			name: "sample dtype differs from the declaration",
			brk: func(t *testing.T, dir string) {
				writeTensor(t, filepath.Join(dir, sample0, "input_0.pb"),
					bundle.Tensor{Name: "input", DType: bundle.Float64, Shape: []int64{1, 4}, Data: make([]byte, 32)})
			},
			want: []string{`sample "0/test_data_set_0": input_0.pb holds float64, input "input" is declared float32`},
		},
		{
			name: "truncated sample file",
			brk: func(t *testing.T, dir string) {
				p := filepath.Join(dir, sample1, "output_0.pb")
				b := readFile(t, p)
				writeFile(t, p, b[:len(b)/2])
			},
			want: []string{`sample "0/test_data_set_1": output_0.pb: not a serialized TensorProto`},
		},
		{
			name: "sample file without values",
			brk: func(t *testing.T, dir string) {
				dt := int32(onnxpb.TensorProto_FLOAT)
				b, err := proto.Marshal(&onnxpb.TensorProto{DataType: &dt, Dims: []int64{1, 3}})
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, sample0, "output_0.pb"), b)
			},
			want: []string{"output_0.pb: tensor", "raw_data holds 0 bytes, want 12"},
		},
		{
			name: "sample file that is not a TensorProto",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, sample0, "input_0.pb"), []byte("1.0 2.0 3.0 4.0\n"))
			},
			want: []string{"input_0.pb: not a serialized TensorProto"},
		},
		{
			name: "missing output_0.pb",
			brk:  func(t *testing.T, dir string) { remove(t, filepath.Join(dir, sample0, "output_0.pb")) },
			want: []string{`sample "0/test_data_set_0": output_0.pb for output "output" is missing`},
		},
		{
			name: "missing sample directory",
			brk: func(t *testing.T, dir string) {
				if err := os.RemoveAll(filepath.Join(dir, sample1)); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`sample "0/test_data_set_1": path "0/test_data_set_1" does not exist in the bundle`},
		},
		{
			name: "extra input_5.pb",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, sample0, "input_5.pb"), readFile(t, filepath.Join(dir, sample0, "input_0.pb")))
			},
			want: []string{`sample "0/test_data_set_0": input_5.pb has no matching input (the graph declares 1)`},
		},
		{
			name: "extra output_1.pb",
			brk: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, sample0, "output_1.pb"), readFile(t, filepath.Join(dir, sample0, "output_0.pb")))
			},
			want: []string{"output_1.pb has no matching output (the graph declares 1)"},
		},
		{
			name: "tolerance for an unknown output",
			brk: edit(func(m *bundle.Manifest) {
				m.Graphs[0].Tolerances = map[string]bundle.Tolerance{"logits": {ATol: f64(1e-3)}}
			}),
			want: []string{`tolerances name "logits", which is not a declared output`},
		},
		{
			name: "negative tolerance",
			brk: edit(func(m *bundle.Manifest) {
				m.Graphs[0].Tolerances = map[string]bundle.Tolerance{"output": {ATol: f64(1e-3), RTol: f64(-0.1)}}
			}),
			want: []string{`bundle.json: graphs[0].tolerances.output.rtol: is -0.1, want ≥ 0`},
		},
		{
			name: "static axis with min != max",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Max[1] = 5 }),
			want: []string{`tensor "input": static axis 1 of size 4 has min 4 and max 5`},
		},
		{
			name: "label with the wrong axis index",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Shape[0] = shapes.BatchAxis(1) }),
			want: []string{`tensor "input": axis 0 is labelled "batch1"`, `"batch0"`},
		},
		{
			name: "unknown label",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Shape[0] = shapes.Axis{Label: "seq0"} }),
			want: []string{`bundle.json: graphs[0].inputs[0].shape[0]: is "seq0"; want a static size, or a label "batch<i>"`},
		},
		{
			name: "min above max",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Inputs[0].Min[0] = 9 }),
			want: []string{`tensor "input": axis 0 has min 9 and max 8`},
		},
		{
			name: "min_shape of the wrong rank",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Outputs[0].Min = []int64{1} }),
			want: []string{`tensor "output": shape has rank 2 but min_shape has 1`},
		},
		{
			name: "graph without samples",
			brk:  edit(func(m *bundle.Manifest) { m.Graphs[0].Samples = nil }),
			want: []string{`graph "0": no samples`},
		},
		{
			name: "dynamic_shapes with the wrong rank",
			brk: edit(func(m *bundle.Manifest) {
				m.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 1, Max: 8, Batch: true}}}
			}),
			want: []string{`dynamic_shapes["input"] has 1 dims, the input has rank 2`},
		},
		{
			name: "dynamic_shapes with min not below max",
			brk: edit(func(m *bundle.Manifest) {
				m.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 8, Max: 8, Batch: true}, {Size: 4}}}
			}),
			want: []string{`dynamic_shapes["input"][0] (N): min 8 must be below max 8`},
		},
		{
			name: "sample outside its dynamic_shapes bounds",
			brk: edit(func(m *bundle.Manifest) {
				m.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 2, Max: 8, Batch: true}, {Size: 4}}}
			}),
			want: []string{`sample "0/test_data_set_0": input_0.pb: tensor "input": sample axis 0 is 1, outside dynamic_shapes dim "N" [2, 8]`},
		},
		{
			name: "sample that differs from a static dynamic_shapes dim",
			brk: edit(func(m *bundle.Manifest) {
				m.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 1, Max: 8, Batch: true}, {Size: 5}}}
			}),
			want: []string{`input_0.pb: tensor "input": sample axis 1 is 4, dynamic_shapes fixes it at 5`},
		},
		{
			name: "dynamic_shapes for an unknown input",
			brk: edit(func(m *bundle.Manifest) {
				m.DynamicShapes = shapes.DynamicShapes{"inptu": {{Name: "N", Min: 1, Max: 8, Batch: true}, {Size: 4}}}
			}),
			want: []string{`dynamic_shapes names "inptu", which is not an input of any graph`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := bundletest.Write(t, tt.opts...)
			mustOpen(t, dir) // the case starts from a valid bundle
			tt.brk(t, dir)
			b, err := bundle.Open(dir)
			if err == nil {
				t.Fatalf("Open succeeded on a broken bundle: %+v", b.Manifest)
			}
			msg := strings.ReplaceAll(err.Error(), dir, "<dir>") // the path holds the test's name
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if got := bundle.IsInvalid(err); got == tt.valid {
				t.Errorf("IsInvalid = %v, want %v (err: %v)", got, !tt.valid, err)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error does not name the bundle %s: %v", dir, err)
			}
		})
	}
}

func TestOpenReportsEveryProblem(t *testing.T) {
	dir := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
	bundletest.EditManifest(t, dir, func(m *bundle.Manifest) {
		m.Graphs[0].Inputs[0].DType = bundle.Int32
		m.Graphs[1].Samples = nil
	})
	_, err := bundle.Open(dir)
	var ie *bundle.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("want *InvalidError, got %v", err)
	}
	if len(ie.Problems) != 2 {
		t.Fatalf("want 2 problems, got %d: %q", len(ie.Problems), ie.Problems)
	}
	for _, w := range []string{"(2 problems)", `graph "0": input "input" is declared int32`, `graph "1": no samples`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
}

func TestOpenNotABundle(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, path, want string
	}{
		{"does not exist", filepath.Join(dir, "nope"), "no such file"},
		{"is a file", filepath.Join(dir, "file.json"), "is not a directory"},
	}
	writeFile(t, filepath.Join(dir, "file.json"), []byte("{}"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.Open(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%s) = %v, want an error saying %q", tt.path, err, tt.want)
			}
			if bundle.IsInvalid(err) {
				t.Errorf("IsInvalid(%v) = true for a path that is not a bundle", err)
			}
		})
	}
	if bundle.IsInvalid(nil) || bundle.IsInvalid(errors.New("x")) {
		t.Error("IsInvalid is true for an unrelated error")
	}
}

func TestOpenValid(t *testing.T) {
	dir := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs), bundletest.WithSamples(1, 4, 8))
	b := mustOpen(t, dir)
	if b.Dir != dir || b.Manifest.Model != bundletest.DefaultModel || len(b.Manifest.Graphs) != 2 {
		t.Fatalf("unexpected bundle: dir %s, model %q, %d graphs", b.Dir, b.Manifest.Model, len(b.Manifest.Graphs))
	}
	io := b.IO["0"]
	if len(io.Inputs) != 1 || io.Inputs[0].Name != "input" || io.Inputs[0].DType != bundle.Float32 ||
		!slices.Equal(io.Inputs[0].Dims, []int64{-1, bundletest.MLPIn}) || !slices.Equal(io.Inputs[0].Params, []string{"N", ""}) {
		t.Errorf("IO[0].Inputs = %+v", io.Inputs)
	}
	if io.IRVersion != 8 || io.Opsets[""] != 13 {
		t.Errorf("IO[0]: ir %d opsets %v", io.IRVersion, io.Opsets)
	}
	if got := infoNames(b.IO["1"].Outputs); !slices.Equal(got, []string{"y", "s"}) {
		t.Errorf("IO[1] outputs = %v", got)
	}

	for _, g := range b.Manifest.Graphs {
		samples, err := b.Samples(g.Name)
		if err != nil {
			t.Fatalf("Samples(%q): %v", g.Name, err)
		}
		if len(samples) != 3 {
			t.Fatalf("Samples(%q): %d samples, want 3", g.Name, len(samples))
		}
		for i, s := range samples {
			bs := []int64{1, 4, 8}[i]
			if s.Dir != g.Samples[i] {
				t.Errorf("sample %d dir %q, want %q", i, s.Dir, g.Samples[i])
			}
			checkTensors(t, s.Inputs, g.Inputs, bs)
			checkTensors(t, s.Outputs, g.Outputs, bs)
		}
	}
	if _, err := b.Samples("7"); err == nil || !strings.Contains(err.Error(), `no graph "7"`) {
		t.Errorf("Samples of an unknown graph: %v", err)
	}
}

func checkTensors(t *testing.T, got []bundle.Tensor, decls []bundle.TensorDecl, bs int64) {
	t.Helper()
	if len(got) != len(decls) {
		t.Fatalf("%d tensors, want %d", len(got), len(decls))
	}
	for k, d := range decls {
		want := append([]int64{bs}, d.Min[1:]...)
		if got[k].Name != d.Name || got[k].DType != d.DType || !slices.Equal(got[k].Shape, want) {
			t.Errorf("tensor %d is %s %s%v, want %s %s%v", k, got[k].Name, got[k].DType, got[k].Shape, d.Name, d.DType, want)
		}
		if err := got[k].Validate(); err != nil {
			t.Error(err)
		}
	}
}

func infoNames(vs []bundle.ValueInfo) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestSamplesMatchWhatWasWritten(t *testing.T) {
	dir := bundletest.Write(t)
	b := mustOpen(t, dir)
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		for k, tensor := range append(s.Inputs, s.Outputs...) {
			kind, idx := "input", k
			if k >= len(s.Inputs) {
				kind, idx = "output", k-len(s.Inputs)
			}
			raw, err := bundle.ReadTensorFile(filepath.Join(dir, bundletest.SamplePath("0", i), kind+"_"+string(rune('0'+idx))+".pb"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw.Data, tensor.Data) {
				t.Errorf("sample %d %s %d: data differs from the file", i, kind, idx)
			}
		}
	}
}

func TestDigest(t *testing.T) {
	dir := bundletest.Write(t)
	d1, err := mustOpen(t, dir).Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := mustOpen(t, dir).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatalf("digest differs between two opens: %s, %s", d1, d2)
	}
	if !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Fatalf("digest %q is not sha256:<hex>", d1)
	}
	if other, _ := mustOpen(t, bundletest.Write(t)).Digest(); other != d1 {
		t.Errorf("two identical bundles have different digests: %s, %s", d1, other)
	}

	// A file the bundle does not reference changes nothing.
	writeFile(t, filepath.Join(dir, "NOTES.txt"), []byte("hello"))
	if d, _ := mustOpen(t, dir).Digest(); d != d1 {
		t.Errorf("an unreferenced file changed the digest")
	}

	// One byte of one sample value changes it.
	p := filepath.Join(dir, sample1, "output_0.pb")
	b := readFile(t, p)
	b[len(b)-1] ^= 0x01 // the last byte of raw_data: still a valid float32
	writeFile(t, p, b)
	d3, err := mustOpen(t, dir).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d3 == d1 {
		t.Errorf("changing a sample byte left the digest at %s", d1)
	}

	// So does the manifest.
	bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.ModuleType = "torch.nn.Linear" })
	if d4, _ := mustOpen(t, dir).Digest(); d4 == d3 {
		t.Errorf("changing bundle.json left the digest at %s", d3)
	}
}

func TestFiles(t *testing.T) {
	dir := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
	b := mustOpen(t, dir)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0/model.onnx",
		"0/test_data_set_0/input_0.pb", "0/test_data_set_0/output_0.pb",
		"0/test_data_set_1/input_0.pb", "0/test_data_set_1/output_0.pb",
		"1/model.onnx",
		"1/test_data_set_0/input_0.pb", "1/test_data_set_0/input_1.pb", "1/test_data_set_0/output_0.pb", "1/test_data_set_0/output_1.pb",
		"1/test_data_set_1/input_0.pb", "1/test_data_set_1/input_1.pb", "1/test_data_set_1/output_0.pb", "1/test_data_set_1/output_1.pb",
		"bundle.json",
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
		data := readFile(t, filepath.Join(dir, filepath.FromSlash(f.Path)))
		sum := sha256.Sum256(data)
		if f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(data)) {
			t.Errorf("%s: sha256 %s size %d, want %x size %d", f.Path, f.SHA256, f.Size, sum, len(data))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Files() = %q\nwant %q", got, want)
	}
	if bundle.DigestOf(files) != must(b.Digest()) {
		t.Error("Digest() is not DigestOf(Files())")
	}

	gf, err := b.GraphFiles("1")
	if err != nil {
		t.Fatal(err)
	}
	var gotG []string
	for _, f := range gf {
		gotG = append(gotG, f.Path)
	}
	if !slices.Equal(gotG, want[5:14]) {
		t.Errorf("GraphFiles(1) = %q\nwant %q", gotG, want[5:14])
	}
	if _, err := b.GraphFiles("2"); err == nil {
		t.Error("GraphFiles of an unknown graph succeeded")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestOpenValidOptionalFields(t *testing.T) {
	dir := bundletest.Write(t, bundletest.WithManifest(func(m *bundle.Manifest) {
		m.ModuleType = "my_package.MLP"
		m.DynamicShapes = shapes.DynamicShapes{"input": {{Name: "N", Min: 1, Opt: 4, Max: 16, Batch: true}, {Size: bundletest.MLPIn}}}
		m.Graphs[0].Tolerances = map[string]bundle.Tolerance{"output": {ATol: f64(1e-4), RTol: f64(0)}}
		m.Graphs[0].Inputs[0].Opt = []int64{4, bundletest.MLPIn}
		m.AITune = []byte(`{"format":"aitune.block/v1","forward_signature":{"parameters":[{"name":"input","kind":"POSITIONAL_OR_KEYWORD","has_default":false}]},"graphs":{"0":{"inputs":[{"name":"input","path":[["input","DICT"]]}],"outputs":[{"name":"output","path":[]}]}}}`)
	}))
	b := mustOpen(t, dir)
	m := b.Manifest
	if m.ModuleType != "my_package.MLP" || m.DynamicShapes["input"][0].Max != 16 || *m.Graphs[0].Tolerances["output"].ATol != 1e-4 {
		t.Errorf("optional fields did not survive: %+v", m)
	}
	var aitune map[string]any
	if err := json.Unmarshal(m.AITune, &aitune); err != nil || aitune["forward_signature"] == nil {
		t.Errorf("aitune block = %s (%v)", m.AITune, err)
	}
	// The manifest round-trips through Marshal.
	raw, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := bundle.ParseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := again.Marshal()
	if !bytes.Equal(raw, raw2) {
		t.Errorf("Marshal(ParseManifest(Marshal(m))) differs:\n%s\n%s", raw, raw2)
	}
	if !bytes.Equal(raw, readFile(t, filepath.Join(dir, bundle.ManifestName))) {
		t.Error("bundle.json is not what Marshal writes")
	}
}

// Bundles made of ONNX node tests as they ship (model.onnx plus
// test_data_set_*), declared with the shapes their graphs give: real models
// and real samples of several dtypes, written by ONNX's own tools.
func TestOpenONNXNodeTestsAsBundles(t *testing.T) {
	root := onnxTestData(t)
	for _, name := range []string{"test_abs", "test_add_uint8", "test_and_bcast3v1d", "test_cast_FLOAT_to_FLOAT16",
		"test_cast_FLOAT16_to_DOUBLE", "test_bitshift_left_uint64", "test_matmul_2d", "test_max_int16"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(root, "node", name)
			io, err := bundle.ReadGraphIO(filepath.Join(src, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			w, err := bundle.NewWriter(filepath.Join(t.TempDir(), name))
			if err != nil {
				t.Fatal(err)
			}
			g := bundle.Graph{Name: "0", ONNX: "model.onnx", Inputs: staticDecls(t, io.Inputs), Outputs: staticDecls(t, io.Outputs)}
			if err := w.CopyFile(g.ONNX, filepath.Join(src, "model.onnx")); err != nil {
				t.Fatal(err)
			}
			sets, _ := filepath.Glob(filepath.Join(src, "test_data_set_*"))
			for _, set := range sets {
				rel := filepath.Base(set)
				files, _ := filepath.Glob(filepath.Join(set, "*.pb"))
				for _, f := range files {
					if err := w.CopyFile(rel+"/"+filepath.Base(f), f); err != nil {
						t.Fatal(err)
					}
				}
				g.Samples = append(g.Samples, rel)
			}
			b, err := w.Commit(bundle.Manifest{Format: bundle.FormatV1, Model: name, Graphs: []bundle.Graph{g}})
			if err != nil {
				t.Fatal(err)
			}
			samples, err := b.Samples("0")
			if err != nil || len(samples) != len(sets) {
				t.Fatalf("Samples: %d, %v", len(samples), err)
			}
			for _, s := range samples {
				for k, in := range s.Inputs {
					if in.Name != io.Inputs[k].Name || in.DType != io.Inputs[k].DType || !slices.Equal(in.Shape, io.Inputs[k].Dims) {
						t.Errorf("input %d: %s %s%v, the graph says %+v", k, in.Name, in.DType, in.Shape, io.Inputs[k])
					}
				}
			}
		})
	}
}

// staticDecls declares tensors exactly as an ONNX graph with static shapes
// gives them.
func staticDecls(t *testing.T, vs []bundle.ValueInfo) []bundle.TensorDecl {
	t.Helper()
	var out []bundle.TensorDecl
	for _, v := range vs {
		d := bundle.TensorDecl{DType: v.DType, TensorSpec: shapes.TensorSpec{Name: v.Name, Shape: []shapes.Axis{}, Min: []int64{}, Max: []int64{}}}
		for _, n := range v.Dims {
			if n < 0 {
				t.Skipf("%s has a dynamic dim", v.Name)
			}
			d.Shape = append(d.Shape, shapes.Static(n))
			d.Min = append(d.Min, n)
			d.Max = append(d.Max, n)
		}
		out = append(out, d)
	}
	return out
}
