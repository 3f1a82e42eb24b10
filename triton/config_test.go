package triton_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/tritoncheck"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
	"github.com/tunefleet/tunefleet/trt"
)

func decl(name string, dt bundle.DType, shape []shapes.Axis, lo, hi []int64) bundle.TensorDecl {
	return bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: name, Shape: shape, Min: lo, Max: hi}, DType: dt}
}

var (
	b0 = shapes.BatchAxis(0)
	s  = shapes.Static
)

// A TensorRT winner: the engine's one profile is the graph's; the config
// batches along axis 0 up to the profile's max, names profile 0, runs on
// the GPU, and prefers the batch sizes the sweep found within 10% of the
// best throughput. Each case is parsed by Triton's own proto and checked
// against Triton's load rules.
func TestConfigs(t *testing.T) {
	img := decl("image", bundle.Float16, []shapes.Axis{b0, s(3), shapes.DynAxis(2), s(16)}, []int64{1, 3, 8, 16}, []int64{16, 3, 32, 16})
	logits := decl("logits", bundle.Float32, []shapes.Axis{b0, s(10)}, []int64{1, 10}, []int64{16, 10})
	prof := shapes.Profile{Inputs: []shapes.InputProfile{{Name: "image", Min: []int64{1, 3, 8, 16}, Opt: []int64{16, 3, 32, 16}, Max: []int64{16, 3, 32, 16}}}}
	sweep := []backend.Stats{{BatchSize: 1, Throughput: 100}, {BatchSize: 4, Throughput: 370}, {BatchSize: 8, Throughput: 395}, {BatchSize: 16, Throughput: 400}}
	trtGraph := state.StateGraph{Name: "0", Inputs: []bundle.TensorDecl{img}, Outputs: []bundle.TensorDecl{logits}, Profile: prof,
		Candidate: "trt:fp16", Engine: &state.EngineRef{File: "model.plan", SHA256: strings.Repeat("a", 64)}, Benchmarks: sweep}

	// No batch axis: state [2, batch1, 64] (recurrent state, batch at 1).
	h := decl("h", bundle.Float32, []shapes.Axis{s(2), shapes.BatchAxis(1), s(64)}, []int64{2, 1, 64}, []int64{2, 8, 64})
	hOut := decl("hn", bundle.Float32, []shapes.Axis{s(2), shapes.BatchAxis(1), s(64)}, []int64{2, 1, 64}, []int64{2, 8, 64})
	noBatch := state.StateGraph{Name: "1", Inputs: []bundle.TensorDecl{h}, Outputs: []bundle.TensorDecl{hOut},
		Profile:   shapes.Profile{Inputs: []shapes.InputProfile{{Name: "h", Min: []int64{2, 1, 64}, Opt: []int64{2, 8, 64}, Max: []int64{2, 8, 64}}}},
		Candidate: "trt", Engine: &state.EngineRef{File: "model.plan"}, Benchmarks: sweep}

	// A plan that says where it runs: the config carries it as a
	// parameter Triton's proto takes and its backends ignore.
	pinned := trtGraph
	pinned.Name = "2"
	pinned.Requires = &state.Requires{ComputeCapability: "9.0", TensorRT: "10.3.0"}

	st := &state.State{Model: "tests.Net", Target: "gpu.h100", Platform: "gpu-h100"}
	for _, tc := range []struct {
		name string
		g    state.StateGraph
		want tritoncheck.Config
	}{
		{"tensorrt batching", trtGraph, tritoncheck.Config{
			Name: "tests_Net_0", Platform: "tensorrt_plan", Backend: "tensorrt", File: "model.plan", MaxBatchSize: 16,
			Inputs:    []tritoncheck.Tensor{{Name: "image", DataType: "TYPE_FP16", Dims: []int64{3, -1, 16}}},
			Outputs:   []tritoncheck.Tensor{{Name: "logits", DataType: "TYPE_FP32", Dims: []int64{10}}},
			Preferred: []int64{4, 8, 16}, Kinds: []string{"KIND_GPU"}, Profiles: []string{"0"},
		}},
		{"batch axis not at 0", noBatch, tritoncheck.Config{
			Name: "tests_Net_1", Platform: "tensorrt_plan", Backend: "tensorrt", File: "model.plan", MaxBatchSize: 0,
			Inputs:  []tritoncheck.Tensor{{Name: "h", DataType: "TYPE_FP32", Dims: []int64{2, -1, 64}}},
			Outputs: []tritoncheck.Tensor{{Name: "hn", DataType: "TYPE_FP32", Dims: []int64{2, -1, 64}}},
			Kinds:   []string{"KIND_GPU"}, Profiles: []string{"0"},
		}},
		{"tensorrt with its requirement", pinned, tritoncheck.Config{
			Name: "tests_Net_2", Platform: "tensorrt_plan", Backend: "tensorrt", File: "model.plan", MaxBatchSize: 16,
			Inputs:    []tritoncheck.Tensor{{Name: "image", DataType: "TYPE_FP16", Dims: []int64{3, -1, 16}}},
			Outputs:   []tritoncheck.Tensor{{Name: "logits", DataType: "TYPE_FP32", Dims: []int64{10}}},
			Preferred: []int64{4, 8, 16}, Kinds: []string{"KIND_GPU"}, Profiles: []string{"0"},
			Parameters: map[string]string{triton.RequiresParameter: `{"compute_capability":"9.0","tensorrt":"10.3.0"}`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := triton.NewConfig(triton.ModelName(st.Model, tc.g.Name), st, tc.g, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tritoncheck.Parse(t, []byte(c.Text()))
			if err != nil {
				t.Fatalf("Triton's proto refuses it: %v\n%s", err, c.Text())
			}
			if err := tritoncheck.Validate(m, 1); err != nil {
				t.Fatalf("Triton would refuse it: %v\n%s", err, c.Text())
			}
			if got := tritoncheck.Summary(m); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config\n%s\nreads as %+v\nwant       %+v", c.Text(), got, tc.want)
			}
		})
	}
}

// What Triton cannot serve is said, naming the tensor: a scalar input of a
// graph without a batch axis at 0, a dtype Triton has no type for.
func TestConfigRefusals(t *testing.T) {
	st := &state.State{Model: "m", Target: "cpu"}
	scalar := decl("sr", bundle.Int64, []shapes.Axis{}, []int64{}, []int64{})
	x := decl("x", bundle.Float32, []shapes.Axis{s(2), shapes.DynAxis(1)}, []int64{2, 1}, []int64{2, 9})
	g := state.StateGraph{Name: "0", Inputs: []bundle.TensorDecl{x, scalar}, Outputs: []bundle.TensorDecl{x}, Candidate: "trt", Engine: &state.EngineRef{File: "model.plan"}}
	if _, err := triton.NewConfig("m_0", st, g, nil); err == nil || !strings.Contains(err.Error(), "sr is a scalar") {
		t.Errorf("scalar input of a non-batching graph: %v", err)
	}
	g.Inputs = []bundle.TensorDecl{decl("x", "complex64", x.Shape, x.Min, x.Max)}
	if _, err := triton.NewConfig("m_0", st, g, nil); err == nil || !strings.Contains(err.Error(), `dtype "complex64" has no Triton data type`) {
		t.Errorf("unknown dtype: %v", err)
	}
}

// The checker is not vacuous: Triton's proto refuses an unknown field and
// a wrong type, and the load rules catch what Triton core refuses.
func TestCheckerRefuses(t *testing.T) {
	good := `name: "m" platform: "onnxruntime_onnx" backend: "onnxruntime" max_batch_size: 4
version_policy { latest { num_versions: 1 } }
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]`
	m, err := tritoncheck.Parse(t, []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := tritoncheck.Validate(m, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"unknown field", strings.Replace(good, "max_batch_size: 4", "max_batch: 4", 1), "unknown field"},
		{"wrong type", strings.Replace(good, "max_batch_size: 4", `max_batch_size: "4"`, 1), "invalid value for int32"},
		{"unknown data type", strings.Replace(good, "TYPE_FP32 dims: [ 8 ] } ]\noutput", "TYPE_FLOAT dims: [ 8 ] } ]\noutput", 1), "TYPE_FLOAT"},
	} {
		if _, err := tritoncheck.Parse(t, []byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: parse error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"preferred above max", "instance_group", "dynamic_batching { preferred_batch_size: 8 }\ninstance_group", "preferred size must be <= max batch size"},
		{"zero dim", "dims: [ 8 ] } ]\noutput", "dims: [ 0 ] } ]\noutput", "dimension must be integer >= 1"},
		{"no dims", "dims: [ 8 ] } ]\noutput", "} ]\noutput", "must specify 'dims'"},
		{"profile on onnx", "kind: KIND_CPU", `kind: KIND_CPU profile: "0"`, "only supported for TensorRT"},
		{"non-batching", `max_batch_size: 4`, `max_batch_size: 0`, ""},
		{"pair", `backend: "onnxruntime"`, `backend: "tensorrt"`, "unexpected 'platform' and 'backend' pair"},
	} {
		m, err := tritoncheck.Parse(t, []byte(strings.Replace(good, tc.old, tc.new, 1)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = tritoncheck.Validate(m, 0)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The TensorRT config matches the engine it serves: trt builds the engine
// with exactly this trtexec command line (trt.BuildArgs, one profile: the
// graph's), and the config's max_batch_size is that profile's max batch,
// from batch 1, its dims -1 exactly where the profile's min and max
// differ, and it names the engine's only profile, "0".
func TestTensorRTConfigMatchesBuildCommand(t *testing.T) {
	img := decl("image", bundle.Float16, []shapes.Axis{b0, s(3), shapes.DynAxis(2), s(16)}, []int64{1, 3, 8, 16}, []int64{16, 3, 32, 16})
	logits := decl("logits", bundle.Float32, []shapes.Axis{b0, s(10)}, []int64{1, 10}, []int64{16, 10})
	prof := shapes.Profile{Inputs: []shapes.InputProfile{{Name: "image", Min: []int64{1, 3, 8, 16}, Opt: []int64{16, 3, 32, 16}, Max: []int64{16, 3, 32, 16}}}}
	g := state.StateGraph{Name: "0", Inputs: []bundle.TensorDecl{img}, Outputs: []bundle.TensorDecl{logits}, Profile: prof,
		Candidate: "trt", Engine: &state.EngineRef{File: trt.EngineFile}}
	cand, err := backend.ParseCandidate(g.Candidate)
	if err != nil {
		t.Fatal(err)
	}
	tcfg, err := trt.ParseConfig(cand)
	if err != nil {
		t.Fatal(err)
	}
	args, err := trt.BuildArgs(trt.Version{Major: 10, Minor: 3}, tcfg, trt.BuildSpec{ONNX: "model.onnx", Engine: trt.EngineFile, Profiles: []shapes.Profile{g.Profile}})
	if err != nil {
		t.Fatal(err)
	}
	flag := func(name string) []int64 {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"=image:"); ok {
				dims, err := shapes.ParseShape(v)
				if err != nil {
					t.Fatal(err)
				}
				return dims
			}
		}
		t.Fatalf("no --%s for image in %q", name, args)
		return nil
	}
	lo, hi := flag("minShapes"), flag("maxShapes")
	profiles := 1
	for _, a := range args {
		if strings.HasPrefix(a, "--profile") {
			t.Fatalf("the build asks for more than one profile: %q", args)
		}
	}
	c, err := triton.NewConfig("m_0", &state.State{Model: "m", Target: "gpu.h100"}, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tritoncheck.Parse(t, []byte(c.Text()))
	if err != nil {
		t.Fatal(err)
	}
	if err := tritoncheck.Validate(m, profiles); err != nil {
		t.Fatal(err)
	}
	got := tritoncheck.Summary(m)
	if lo[0] != 1 || got.MaxBatchSize != hi[0] {
		t.Errorf("max_batch_size %d, engine batch %d..%d (%q)", got.MaxBatchSize, lo[0], hi[0], args)
	}
	for i, d := range got.Inputs[0].Dims {
		want := lo[i+1]
		if lo[i+1] != hi[i+1] {
			want = -1
		}
		if d != want {
			t.Errorf("dim %d: config %d, engine profile %d..%d", i+1, d, lo[i+1], hi[i+1])
		}
	}
	if !reflect.DeepEqual(got.Profiles, []string{"0"}) || !reflect.DeepEqual(got.Kinds, []string{"KIND_GPU"}) || got.File != trt.EngineFile {
		t.Errorf("profiles %v kinds %v file %s", got.Profiles, got.Kinds, got.File)
	}
}
