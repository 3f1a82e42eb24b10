package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/realmodels"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/tritoncheck"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
)

// demoBundle makes the demo's three-graph module (the Makefile's
// demo-bundle: an MLP, a convnet and a two-input graph, merged).
func demoBundle(t *testing.T) string {
	t.Helper()
	needORT(t)
	dir := t.TempDir()
	parts := []struct {
		name   string
		model  *onnxtest.Builder
		shapes []string
	}{
		{"mlp", onnxtest.MLP(64, 256, 10), []string{"input:1x64..64x64"}},
		{"convnet", onnxtest.ConvNet(), []string{"image:1x3x16x16..16x3x16x16"}},
		{"two-inputs", onnxtest.TwoInputs(), []string{"a:1x8..32x8", "mask:1x8..32x8"}},
	}
	merge := []string{"bundle", "merge"}
	for _, p := range parts {
		model := filepath.Join(dir, p.name+".onnx")
		if err := p.model.Write(model); err != nil {
			t.Fatal(err)
		}
		args := []string{"bundle", "from-onnx", model, "--out", filepath.Join(dir, "parts", p.name)}
		for _, s := range p.shapes {
			args = append(args, "--shape", s)
		}
		producer(t, args...).wantCode(t, cli.ExitOK)
		merge = append(merge, filepath.Join(dir, "parts", p.name))
	}
	out := filepath.Join(dir, "bundle")
	producer(t, append(merge, "--model", "demo_model", "--out", out)...).wantCode(t, cli.ExitOK)
	return out
}

// realModel is a model of the real-models tier, or a skip (a failure in
// CI) when `make models` has not fetched it.
func realModel(t *testing.T, name string) string {
	t.Helper()
	list, err := realmodels.ReadList("../testkit/realmodels/models.tsv")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.Name != name {
			continue
		}
		p, err := m.Path(realmodels.Dir())
		if err != nil {
			if testsvc.InCI() {
				t.Fatalf("CI is set but %s is not fetched (make models): %v", name, err)
			}
			t.Skipf("%s is not fetched (make models): %v", name, err)
		}
		return p
	}
	t.Fatalf("%s is not in models.tsv", name)
	return ""
}

// `fetch --format triton` lays out a Triton model repository that Triton's
// own model_config.proto parses strictly and whose configs pass the rules
// Triton core applies at load; each ONNX model loads in a fresh ONNX
// Runtime session with exactly the names, data types and dims its config
// declares; graphs.json maps every graph spec to its model. Shown on the
// demo's three-graph module and on a real model.
func TestFetchTriton(t *testing.T) {
	t.Parallel()
	needORT(t)
	for _, tc := range []struct {
		name, model string
		bundle      func(t *testing.T) string
		graphs      int
	}{
		{"demo module of three graph specs", "demo_model", demoBundle, 3},
		{"real model ppocr_mobile_v2_cls", "ppocr_mobile_v2_cls", func(t *testing.T) string {
			b := filepath.Join(t.TempDir(), "bundle")
			producer(t, "bundle", "from-onnx", realModel(t, "ppocr_mobile_v2_cls.onnx"), "--shape", "x:1x3x48x192..4x3x48x192", "--out", b).wantCode(t, cli.ExitOK)
			return b
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bundle(t)
			dir := t.TempDir()
			store := "file://" + filepath.Join(dir, "store")
			producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic,ort:cpu:all", "--strategy", "max-throughput", "--bench-time", benchTime, "--store", store).wantCode(t, cli.ExitOK)
			repo := filepath.Join(dir, "repo")
			o := producer(t, "fetch", tc.model, "--platform", "cpu", "--format", "triton", "--store", store, "--out", repo)
			o.wantCode(t, cli.ExitOK)
			if !strings.Contains(o.stdout, "Triton model repository") {
				t.Errorf("fetch says:\n%s", o.stdout)
			}
			configs := tritoncheck.Repository(t, repo, 0)
			var m triton.Map
			data, err := os.ReadFile(filepath.Join(repo, triton.MapFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			var st state.State
			data, err = os.ReadFile(filepath.Join(repo, "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatal(err)
			}
			if len(configs) != tc.graphs || len(m.Graphs) != tc.graphs || len(st.Graphs) != tc.graphs {
				t.Fatalf("%d models, %d in graphs.json, %d graphs in the state; want %d", len(configs), len(m.Graphs), len(st.Graphs), tc.graphs)
			}
			for i, g := range st.Graphs {
				mg := m.Graphs[i]
				c, ok := configs[mg.TritonModel]
				if mg.Graph != g.Name || !ok || mg.Candidate != g.Candidate {
					t.Errorf("graphs.json maps graph %s (won by %s) to %+v", g.Name, g.Candidate, mg)
					continue
				}
				if c.Platform != triton.PlatformONNX || !slices.Equal(c.Kinds, []string{"KIND_CPU"}) {
					t.Errorf("%s: platform %s kinds %v, want onnxruntime_onnx on KIND_CPU", c.Name, c.Platform, c.Kinds)
				}
				// The winner's level, as Triton's onnxruntime backend reads it.
				want := map[string]int64{"ort:cpu:basic": -1, "ort:cpu:all": 0}[g.Candidate]
				if c.GraphLevel == nil || *c.GraphLevel != want {
					t.Errorf("%s won as %s: graph level %v, want %d", c.Name, g.Candidate, c.GraphLevel, want)
				}
				// Every graph here batches along axis 0 up to its recorded max,
				// and the batcher prefers only measured batch sizes.
				if c.MaxBatchSize != g.Inputs[0].Max[0] || c.MaxBatchSize < 2 {
					t.Errorf("%s: max_batch_size %d, want the recorded max batch %d", c.Name, c.MaxBatchSize, g.Inputs[0].Max[0])
				}
				measured := map[int64]bool{}
				for _, s := range g.Benchmarks {
					measured[int64(s.BatchSize)] = true
				}
				if len(c.Preferred) == 0 {
					t.Errorf("%s: no preferred batch size", c.Name)
				}
				for _, p := range c.Preferred {
					if !measured[p] {
						t.Errorf("%s: preferred batch size %d was never measured (%v)", c.Name, p, g.Benchmarks)
					}
				}
				tritoncheck.ONNXModel(t, filepath.Join(repo, c.Name), c)
			}
		})
	}
}

// A real model Triton cannot serve as recorded (silero VAD: its state's
// batch axis is at 1, and its sample rate is a scalar, which Triton's
// non-batching models cannot declare) is refused with the tensor named,
// exit 1 and nothing written.
func TestFetchTritonRefusesScalarWithoutBatch(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", realModel(t, "silero_vad_v5.onnx"), "--shape", "input:1x512..2x512", "--shape", "state:2x1x128..2x2x128",
		"--batch-axis", "state:1", "--value", "sr=16000", "--out", b).wantCode(t, cli.ExitOK)
	store := "file://" + filepath.Join(dir, "store")
	producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store).wantCode(t, cli.ExitOK)
	repo := filepath.Join(dir, "repo")
	producer(t, "fetch", "silero_vad_v5", "--platform", "cpu", "--format", "triton", "--store", store, "--out", repo).
		wantError(t, "producer", cli.ExitFailed, "sr is a scalar (rank 0)", "Triton cannot declare it")
	wantAbsent(t, repo)
}
