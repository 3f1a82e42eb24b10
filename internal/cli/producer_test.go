package cli_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// mlpForward computes the MLP fixture in float64 from the weights in its
// ONNX file: relu(x·w1 + b1)·w2 + b2, one row per batch element.
func mlpForward(t *testing.T, modelPath string, x bundle.Tensor) []float64 {
	t.Helper()
	raw, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	w := map[string]bundle.Tensor{}
	for _, tp := range m.GetGraph().GetInitializer() {
		tt, err := bundle.FromTensorProto(tp)
		if err != nil {
			t.Fatal(err)
		}
		w[tp.GetName()] = tt
	}
	w1, b1, w2, b2 := w["w1"], w["b1"], w["w2"], w["b2"]
	if !slices.Equal(w1.Shape, []int64{mlpIn, mlpHidden}) || !slices.Equal(w2.Shape, []int64{mlpHidden, mlpOut}) {
		t.Fatalf("MLP fixture weights have shapes %v and %v", w1.Shape, w2.Shape)
	}
	n := x.Shape[0]
	out := make([]float64, n*mlpOut)
	h := make([]float64, mlpHidden)
	for r := int64(0); r < n; r++ {
		for j := range h {
			s := b1.Float64At(int64(j))
			for i := int64(0); i < mlpIn; i++ {
				s += x.Float64At(r*mlpIn+i) * w1.Float64At(i*mlpHidden+int64(j))
			}
			h[j] = max(s, 0)
		}
		for k := int64(0); k < mlpOut; k++ {
			s := b2.Float64At(k)
			for j := range h {
				s += h[j] * w2.Float64At(int64(j)*mlpOut+k)
			}
			out[r*mlpOut+k] = s
		}
	}
	return out
}

func TestFromONNX(t *testing.T) {
	needORT(t)
	tmp := privateTempDir(t)
	model := writeMLP(t)
	out := filepath.Join(t.TempDir(), "nested", "mlp-bundle") // the parent does not exist yet
	o := producer(t, "bundle", "from-onnx", model, "--shape", "input:1x64..16x64", "--samples", "3", "--out", out)
	o.wantCode(t, cli.ExitOK)
	wantNoScratch(t, tmp)
	for _, w := range []string{"bundle " + out, "model mlp", "1 graph(s)", "digest sha256:", "3 sample(s)", "input float32[batch0=1..16,64]", "output float32[batch0=1..16,16]"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("stdout does not contain %q:\n%s", w, o.stdout)
		}
	}
	if o.stderr != "" {
		t.Errorf("stderr is not empty: %q", o.stderr)
	}
	if got := entries(t, filepath.Dir(out)); !slices.Equal(got, []string{"mlp-bundle"}) {
		t.Errorf("beside the bundle: %v, want only the bundle", got)
	}

	b, err := bundle.Open(out)
	if err != nil {
		t.Fatalf("the bundle does not validate: %v", err)
	}
	if b.Manifest.Model != "mlp" || len(b.Manifest.Graphs) != 1 {
		t.Fatalf("manifest: model %q, %d graphs", b.Manifest.Model, len(b.Manifest.Graphs))
	}
	g := b.Manifest.Graphs[0]
	if len(g.Inputs) != 1 || !slices.Equal(g.Inputs[0].Min, []int64{1, 64}) || !slices.Equal(g.Inputs[0].Max, []int64{16, 64}) {
		t.Errorf("input declared as %+v, want [1 64]..[16 64]", g.Inputs)
	}
	if len(g.Outputs) != 1 || !slices.Equal(g.Outputs[0].Min, []int64{1, 16}) || !slices.Equal(g.Outputs[0].Max, []int64{16, 16}) {
		t.Errorf("output declared as %+v, want [1 16]..[16 16]", g.Outputs)
	}
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 {
		t.Fatalf("%d samples, want 3", len(samples))
	}
	// Sample 0 has the max shape (benchmarks batch from it), the last the min.
	for k, wantN := range []int64{16, 9, 1} {
		s := samples[k]
		if len(s.Inputs) != 1 || !slices.Equal(s.Inputs[0].Shape, []int64{wantN, mlpIn}) {
			t.Fatalf("sample %d: input shape %v, want [%d %d]", k, s.Inputs[0].Shape, wantN, mlpIn)
		}
		if len(s.Outputs) != 1 || !slices.Equal(s.Outputs[0].Shape, []int64{wantN, mlpOut}) {
			t.Fatalf("sample %d: output shape %v, want [%d %d]", k, s.Outputs[0].Shape, wantN, mlpOut)
		}
		// Random floats lie in [-1, 1).
		for i := range s.Inputs[0].Len() {
			if v := s.Inputs[0].Float64At(i); v < -1 || v >= 1 {
				t.Fatalf("sample %d: input element %d is %g, outside [-1, 1)", k, i, v)
			}
		}
		// The reference outputs are the model's outputs.
		want := mlpForward(t, model, s.Inputs[0])
		for i, w := range want {
			got := s.Outputs[0].Float64At(int64(i))
			if math.Abs(got-w) > 1e-5+1e-4*math.Abs(w) {
				t.Fatalf("sample %d: reference output element %d is %g, the MLP computes %g", k, i, got, w)
			}
		}
	}
	// The bundle holds a copy of the model.
	got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(g.ONNX)))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := os.ReadFile(model); !slices.Equal(got, want) {
		t.Error("the bundle's model.onnx differs from the model given")
	}

	// The digest from-onnx prints is the one validate prints.
	s := validate(t, out)
	if !strings.Contains(o.stdout, s.Digest) {
		t.Errorf("from-onnx printed a digest other than validate's %s:\n%s", s.Digest, o.stdout)
	}
	if s.Model != "mlp" || len(s.Graphs) != 1 || s.Graphs[0].Samples != 3 || s.Graphs[0].Name != "0" {
		t.Errorf("validate -o json: %+v", s)
	}
}

func TestFromONNXOptions(t *testing.T) {
	t.Parallel()
	needORT(t)
	// A model with a static input needs no --shape; --model names it;
	// --samples 1 records the (only) shape once.
	model := filepath.Join(t.TempDir(), "static.onnx")
	b := onnxtest.New("static", 13)
	b.Input("x", onnxpb.TensorProto_FLOAT, 2, 8).Output("y", onnxpb.TensorProto_FLOAT, 2, 8)
	b.Node("Relu", []string{"x"}, []string{"y"})
	if err := b.Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	producer(t, "bundle", "from-onnx", model, "--samples", "1", "--model", "my.Static", "--out", out).wantCode(t, cli.ExitOK)
	s := validate(t, out)
	if s.Model != "my.Static" || len(s.Graphs) != 1 || s.Graphs[0].Samples != 1 {
		t.Errorf("validate: %+v", s)
	}
	if !slices.Equal(s.Graphs[0].Inputs, []string{"x float32[2,8]"}) {
		t.Errorf("inputs %q, want the static shape", s.Graphs[0].Inputs)
	}
	// An empty output directory is fine.
	empty := t.TempDir()
	producer(t, "bundle", "from-onnx", model, "--out", empty).wantCode(t, cli.ExitOK)
	validate(t, empty)
}

func TestFromONNXIntInputs(t *testing.T) {
	t.Parallel()
	needORT(t)
	// ids[N] int64 → Cast → y[N] float: integer samples lie in --int-range.
	model := filepath.Join(t.TempDir(), "ids.onnx")
	b := onnxtest.New("ids", 13)
	b.Input("ids", onnxpb.TensorProto_INT64, "N").Output("y", onnxpb.TensorProto_FLOAT, "N")
	b.Node("Cast", []string{"ids"}, []string{"y"}, onnxtest.IntAttr("to", int64(onnxpb.TensorProto_FLOAT)))
	if err := b.Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	producer(t, "bundle", "from-onnx", model, "--shape", "ids:50..64", "--int-range", "-3..3", "--out", out).wantCode(t, cli.ExitOK)
	_, samples := openSamples(t, out, "0")
	seen := map[int64]bool{}
	for _, s := range samples {
		in := s.Inputs[0]
		if in.DType != bundle.Int64 {
			t.Fatalf("input dtype %s, want int64", in.DType)
		}
		for i := range in.Len() {
			v := in.Int64At(i)
			if v < -3 || v > 3 {
				t.Fatalf("integer input %d outside --int-range -3..3", v)
			}
			seen[v] = true
			if got := s.Outputs[0].Float64At(i); got != float64(v) {
				t.Fatalf("reference output %g for input %d", got, v)
			}
		}
	}
	if len(seen) != 7 {
		t.Errorf("integer inputs take %d distinct values in 114 draws from -3..3, want all 7", len(seen))
	}
}

func TestFromONNXErrors(t *testing.T) {
	dir := t.TempDir()
	mlp := writeMLP(t)
	notONNX := filepath.Join(dir, "notes.onnx")
	if err := os.WriteFile(notONNX, []byte("this is not an ONNX model, just some text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shape := []string{"--shape", "input:1x64..4x64"}
	for _, tc := range []struct {
		name    string
		model   string
		args    []string
		noOut   bool // leave out -o
		prefill bool // -o names a directory with a file in it
		ort     bool // the error comes after the reference engine ran
		want    []string
	}{
		{name: "dynamic dims without --shape", model: mlp,
			want: []string{"1 input(s) have dynamic dims and need --shape NAME:MIN..MAX: input [N 64]", "e.g. --shape input:1x64..8x64"}},
		{name: "--shape for an unknown input", model: mlp, args: append(slices.Clone(shape), "--shape", "image:1x3..2x3"),
			want: []string{`--shape names "image", which is not an input`, "(inputs: input)"}},
		{name: "--shape given twice", model: mlp, args: append(slices.Clone(shape), shape...),
			want: []string{"--shape input is given twice"}},
		{name: "--shape rank mismatch", model: mlp, args: []string{"--shape", "input:1..16"},
			want: []string{"--shape input has rank 1, the model's input has rank 2", "[N 64]"}},
		{name: "--shape changes a fixed axis", model: mlp, args: []string{"--shape", "input:1x32..4x32"},
			want: []string{"--shape input: axis 1 is fixed at 64"}},
		{name: "--shape without a name", model: mlp, args: []string{"--shape", "1x64..4x64"},
			want: []string{`shape "1x64..4x64": want NAME:MIN..MAX`}},
		{name: "--shape min above max", model: mlp, args: []string{"--shape", "input:4x64..1x64"},
			want: []string{`shape "input:4x64..1x64": axis 0 min 4 is above max 1`}},
		{name: "--samples 0", model: mlp, args: append(slices.Clone(shape), "--samples", "0"),
			want: []string{"--samples must be at least 1"}},
		{name: "--int-range reversed", model: mlp, args: append(slices.Clone(shape), "--int-range", "9..0"),
			want: []string{`--int-range "9..0"`, "LO..HI with LO ≤ HI"}},
		{name: "--int-range not a range", model: mlp, args: append(slices.Clone(shape), "--int-range", "ten"),
			want: []string{`--int-range "ten"`, "e.g. 0..9"}},
		{name: "--samples not a number", model: mlp, args: append(slices.Clone(shape), "--samples", "three"),
			want: []string{`invalid argument "three"`, "--samples"}},
		{name: "missing -o", model: mlp, args: shape, noOut: true,
			want: []string{"--out DIR is required"}},
		{name: "output directory not empty", model: mlp, args: shape, prefill: true, ort: true,
			want: []string{"already exists and is not empty"}},
		{name: "not ONNX", model: notONNX, args: shape,
			want: []string{notONNX, "not an ONNX model"}},
		{name: "model file missing", model: filepath.Join(dir, "missing.onnx"), args: shape,
			want: []string{filepath.Join(dir, "missing.onnx"), "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ort {
				needORT(t)
			}
			tmp := privateTempDir(t)
			parent := t.TempDir()
			out := filepath.Join(parent, "bundle")
			if tc.prefill {
				if err := os.MkdirAll(out, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, "keep.txt"), []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"bundle", "from-onnx", tc.model}, tc.args...)
			if !tc.noOut {
				args = append(args, "--out", out)
			}
			producer(t, args...).wantError(t, "producer", cli.ExitUsage, tc.want...)
			wantNoScratch(t, tmp)
			if tc.prefill {
				// The directory is left as it was.
				if got := entries(t, parent); !slices.Equal(got, []string{"bundle"}) {
					t.Errorf("%s holds %v, want only bundle", parent, got)
				}
				if got := entries(t, out); !slices.Equal(got, []string{"keep.txt"}) {
					t.Errorf("%s holds %v, want only keep.txt", out, got)
				}
				return
			}
			// No bundle, half-written or not, and no staging directory.
			if got := entries(t, parent); len(got) != 0 {
				t.Errorf("%s holds %v after a failed run", parent, got)
			}
		})
	}
}

func TestFromONNXMissingLibrary(t *testing.T) {
	// A missing ONNX Runtime library is the machine's problem, not the
	// user's: ExitInternal, with the message saying how to get one.
	tmp := privateTempDir(t)
	parent := t.TempDir()
	lib := filepath.Join(parent, "no-such-libonnxruntime.so")
	o := producer(t, "bundle", "from-onnx", writeMLP(t), "--shape", "input:1x64..4x64", "--ort-lib", lib, "--out", filepath.Join(parent, "bundle"))
	o.wantError(t, "producer", cli.ExitInternal, "reference outputs", lib, "make ort")
	wantNoScratch(t, tmp)
	if got := entries(t, parent); len(got) != 0 {
		t.Errorf("%s holds %v after a failed run", parent, got)
	}
}

func TestFromONNXDeterministic(t *testing.T) {
	t.Parallel()
	needORT(t)
	model := writeMLP(t)
	dir := t.TempDir()
	digest := func(name string, seed string) string {
		out := filepath.Join(dir, name)
		producer(t, "bundle", "from-onnx", model, "--shape", "input:1x64..4x64", "--samples", "2", "--seed", seed, "--out", out).wantCode(t, cli.ExitOK)
		return validate(t, out).Digest
	}
	a, b, c := digest("a", "7"), digest("b", "7"), digest("c", "8")
	if a != b {
		t.Errorf("the same seed gave digests %s and %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same digest %s", a)
	}
	// The bytes are equal too, file by file.
	for _, rel := range []string{"bundle.json", "graphs/0/model.onnx", "graphs/0/samples/0/input_0.pb", "graphs/0/samples/1/output_0.pb"} {
		x, err1 := os.ReadFile(filepath.Join(dir, "a", rel))
		y, err2 := os.ReadFile(filepath.Join(dir, "b", rel))
		if err1 != nil || err2 != nil || !slices.Equal(x, y) {
			t.Errorf("%s differs between runs with the same seed (%v, %v)", rel, err1, err2)
		}
	}
}

// conv2dDir is the test_Conv2d model folder of the ONNX test data, or ""
// (and the test skipped) where it is not installed, unless CI is set.
func conv2dDir(t *testing.T) string {
	t.Helper()
	var tried []string
	if root := os.Getenv("TUNEFLEET_ONNX_TESTDATA"); root != "" {
		tried = append(tried, filepath.Join(root, "pytorch-converted", "test_Conv2d"))
	}
	tried = append(tried, "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d")
	for _, d := range tried {
		if _, err := os.Stat(filepath.Join(d, "model.onnx")); err == nil {
			return d
		}
	}
	// -short runs what needs no corpus, in CI too (make test-short).
	if os.Getenv("CI") != "" && !testing.Short() {
		t.Fatalf("CI is set but the ONNX test data is not installed (tried %v)", tried)
	}
	t.Skipf("ONNX test data not installed (tried %v); set TUNEFLEET_ONNX_TESTDATA", tried)
	return ""
}

func TestFromTestDataThenTune(t *testing.T) {
	t.Parallel()
	src := conv2dDir(t)
	out := filepath.Join(t.TempDir(), "conv2d")
	o := producer(t, "bundle", "from-testdata", src, "--out", out)
	o.wantCode(t, cli.ExitOK)
	for _, w := range []string{"model test_Conv2d", "1 graph(s)", "digest sha256:"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("stdout does not contain %q:\n%s", w, o.stdout)
		}
	}
	s := validate(t, out)
	if s.Model != "test_Conv2d" || len(s.Graphs) != 1 || s.Graphs[0].Samples < 1 {
		t.Fatalf("validate: %+v", s)
	}

	needORT(t)
	res := filepath.Join(t.TempDir(), "result")
	o = worker(t, "tune", out, "--candidates", "ort:cpu:basic,ort:cpu:all", "--strategy", "first-wins",
		"--bench-time", benchTime, "--out", res, "-q")
	o.wantCode(t, cli.ExitOK)
	if o.stderr != "" {
		t.Errorf("-q, yet stderr is %q", o.stderr)
	}
	r := readResult(t, res, "0")
	if r.Winner == nil || r.Winner.Candidate != "ort:cpu:basic" {
		t.Fatalf("winner %+v, want ort:cpu:basic", r.Winner)
	}
	if len(r.Results) != 2 || r.Results[1].Status != "skipped" {
		t.Errorf("first-wins tried the second candidate: %+v", r.Results)
	}
}

func TestFromTestDataErrors(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	noSets := t.TempDir()
	if err := onnxtest.MLP(4, 4, 4).Write(filepath.Join(noSets, "model.onnx")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		src   string
		noOut bool
		want  []string
	}{
		{"missing -o", noSets, true, []string{"--out DIR is required"}},
		{"no model.onnx", empty, false, []string{"from-testdata", filepath.Join(empty, "model.onnx")}},
		{"no data sets", noSets, false, []string{"has no test_data_set_*/ folders"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			args := []string{"bundle", "from-testdata", tc.src}
			if !tc.noOut {
				args = append(args, "--out", filepath.Join(parent, "bundle"))
			}
			producer(t, args...).wantError(t, "producer", cli.ExitUsage, tc.want...)
			if got := entries(t, parent); len(got) != 0 {
				t.Errorf("%s holds %v after a failed run", parent, got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
	s := validate(t, dir)
	if s.Dir != dir || s.Model != bundletest.DefaultModel || len(s.Graphs) != 2 {
		t.Fatalf("validate -o json: %+v", s)
	}
	g := s.Graphs[1]
	if g.Name != "1" || g.Samples != len(bundletest.DefaultSampleBatches) ||
		!slices.Equal(g.Inputs, []string{"a float32[batch0=1..8,8]", "mask float32[batch0=1..8,8]"}) ||
		!slices.Equal(g.Outputs, []string{"y float32[batch0=1..8,8]", "s float32[batch0=1..8]"}) {
		t.Errorf("graph 1: %+v", g)
	}
	o := producer(t, "bundle", "validate", dir)
	o.wantCode(t, cli.ExitOK)
	for _, w := range []string{"bundle " + dir, "2 graph(s)", s.Digest, "graph 0: 2 sample(s)", "graph 1: 2 sample(s)"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("validate (text) does not print %q:\n%s", w, o.stdout)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, dir string)
		want    []string
	}{
		{"empty model name", func(t *testing.T, dir string) {
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Model = "" })
		}, []string{"is invalid", `bundle.json: model: is ""; want`}},
		{"wrong format", func(t *testing.T, dir string) {
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Format = "tunefleet.bundle/v0" })
		}, []string{"is invalid", `bundle.json: format: is "tunefleet.bundle/v0", want "tunefleet.bundle/v1"`}},
		{"missing sample", func(t *testing.T, dir string) {
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) {
				m.Graphs[0].Samples = append(m.Graphs[0].Samples, "0/test_data_set_9")
			})
		}, []string{"is invalid", "0/test_data_set_9"}},
		{"no graphs", func(t *testing.T, dir string) {
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs = nil })
		}, []string{"is invalid", "graphs is empty"}},
		{"bundle.json not JSON", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), []byte("{graphs: ["), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"is invalid"}},
		{"no bundle.json", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, bundle.ManifestName)); err != nil {
				t.Fatal(err)
			}
		}, []string{"is invalid", "no bundle.json at its root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			tc.breakIt(t, dir)
			if _, err := bundle.Open(dir); err == nil {
				t.Fatal("the broken bundle opens")
			}
			for _, format := range []string{"text", "json"} {
				producer(t, "bundle", "validate", "-o", format, dir).wantError(t, "producer", cli.ExitUsage, append([]string{dir}, tc.want...)...)
			}
		})
	}
	t.Run("several problems", func(t *testing.T) {
		dir := bundletest.Write(t)
		bundletest.EditManifest(t, dir, func(m *bundle.Manifest) {
			m.Model = ""
			m.Graphs[0].Inputs[0].DType = "float"
		})
		o := producer(t, "bundle", "validate", dir)
		o.wantCode(t, cli.ExitUsage)
		for _, w := range []string{"producer: bundle " + dir + " is invalid (2 problems)", `bundle.json: model: is ""`, `bundle.json: graphs[0].inputs[0].dtype: is "float"`} {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("stderr does not contain %q:\n%s", w, o.stderr)
			}
		}
	})
	t.Run("not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "bundle.zip")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		producer(t, "bundle", "validate", f).wantError(t, "producer", cli.ExitUsage, "is not a directory")
	})
	t.Run("empty archive", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "bundle.tar")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		producer(t, "bundle", "validate", f).wantError(t, "producer", cli.ExitUsage, "bundle archive", "holds no bundle.json")
	})
	t.Run("missing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		producer(t, "bundle", "validate", missing).wantError(t, "producer", cli.ExitUsage, "open bundle", missing)
	})
	t.Run("bad -o", func(t *testing.T) {
		producer(t, "bundle", "validate", "-o", "yaml", bundletest.Write(t)).wantError(t, "producer", cli.ExitUsage, `-o "yaml": want text or json`)
	})
}
