package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/triton"
)

// A model saved with external data tunes into an engine that carries it:
// ONNX Runtime's optimized model keeps naming mlp.onnx.data, which is
// stored with the engine, fetched beside it and verified, so that the
// fetched engine loads in a fresh ONNX Runtime session and reproduces the
// recording. A state whose engine lacks its data (as runs tuned before
// had) is refused, and fetch writes nothing.
func TestFetchedEngineCarriesItsExternalData(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(mlpIn, mlpHidden, mlpOut).Write(model); err != nil {
		t.Fatal(err)
	}
	bundletest.Externalize(t, model, "mlp.onnx.data", true)
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", model, "--shape", "input:1x64..4x64", "--model", "tests.ExtMLP", "--out", b).wantCode(t, cli.ExitOK)
	storeDir := filepath.Join(dir, "store")
	store := "file://" + storeDir
	producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:all", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store).wantCode(t, cli.ExitOK)

	deploy := filepath.Join(dir, "deploy")
	o := producer(t, "fetch", "tests.ExtMLP", "--platform", "cpu", "--store", store, "--out", deploy)
	o.wantCode(t, cli.ExitOK)
	engine := filepath.Join(deploy, "engines", "0", ort.EngineFile)
	data := filepath.Join(deploy, "engines", "0", "mlp.onnx.data")
	want, _ := os.ReadFile(filepath.Join(dir, "mlp.onnx.data"))
	if got, err := os.ReadFile(data); err != nil || string(got) != string(want) {
		t.Fatalf("the fetched engine's data %s is missing or differs from the model's (err %v)", data, err)
	}
	// A fresh session on the fetched engine (its own folder, nothing else)
	// reproduces the bundle's recording.
	bd, samples := openSamples(t, b, "0")
	g, _ := bd.Manifest.Graph("0")
	cand, _ := backend.ParseCandidate("ort:cpu:disabled")
	eng, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: engine, Candidate: cand, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("the fetched engine does not load: %v", err)
	}
	defer eng.Close()
	for _, s := range samples {
		got, err := eng.Run(context.Background(), s.Inputs, backend.OutputSpecsLike(s.Outputs))
		if err == nil {
			err = backend.Check(got, s.Outputs, g.Tolerances)
		}
		if err != nil {
			t.Errorf("sample %s on the fetched engine: %v", s.Dir, err)
		}
	}

	// A Triton model repository carries it too: beside 1/model.onnx, where
	// the model's relative location finds it, and a fresh session loads it.
	repo := filepath.Join(dir, "triton")
	producer(t, "fetch", "tests.ExtMLP", "--platform", "cpu", "--store", store, "--format", "triton", "--out", repo).wantCode(t, cli.ExitOK)
	vdir := filepath.Join(repo, triton.ModelName("tests.ExtMLP", "0"), triton.Version)
	if got, err := os.ReadFile(filepath.Join(vdir, "mlp.onnx.data")); err != nil || string(got) != string(want) {
		t.Fatalf("the Triton model's engine data is missing or differs from the model's (err %v)", err)
	}
	teng, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: filepath.Join(vdir, "model.onnx"), Candidate: cand, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("the Triton repository's model does not load: %v", err)
	}
	teng.Close()

	// The state says where the data goes; without it, fetch refuses.
	run := strings.Fields(strings.TrimPrefix(o.stdout, "run "))[0]
	run = strings.TrimSuffix(run, ":")
	stateFile := filepath.Join(storeDir, filepath.FromSlash(artifacts.StateKey(run)))
	raw, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	eng0 := st["graphs"].([]any)[0].(map[string]any)["engine"].(map[string]any)
	d := eng0["data"].([]any)
	if len(d) != 1 || d[0].(map[string]any)["file"] != "mlp.onnx.data" {
		t.Fatalf("state.json engine data %v, want mlp.onnx.data", d)
	}
	delete(eng0, "data")
	raw, _ = json.Marshal(st)
	if err := os.WriteFile(stateFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := filepath.Join(dir, "refused")
	producer(t, "fetch", "tests.ExtMLP", "--platform", "cpu", "--run", run, "--store", store, "--out", refused).
		wantError(t, "producer", cli.ExitUsage, `the engine of graph 0 of run `+run+` reads external data "mlp.onnx.data" that the run did not store`, "producer submit --force")
	wantAbsent(t, refused)
	if es := entries(t, dir); strings.Contains(strings.Join(es, " "), "refused") {
		t.Errorf("fetch left %v", es)
	}
}
