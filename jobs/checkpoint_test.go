package jobs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/onnxtest"
	"github.com/tunefleet/tunefleet/internal/orttest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
)

// aituneBlock is what the AITune recorder would write for
// `def forward(self, x)` returning one tensor.
const aituneBlock = `{
  "format": "aitune.block/v1",
  "name": "tests.Tanh",
  "forward_signature": {"parameters": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}]},
  "graphs": {"0": {
    "inputs": [{"name": "input_x", "path": [["x", "DICT"]]}],
    "outputs": [{"name": "output", "path": []}],
    "output_skeleton": null
  }}
}`

func TestFinalizeWritesAnAITuneCheckpointThatLoads(t *testing.T) {
	orttest.Need(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing")
		}
		t.Skip("python3 is missing")
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "tanh.onnx")
	f32 := onnxpb.TensorProto_FLOAT
	if err := onnxtest.New("tanh", 13).Input("input_x", f32, "N", 8).Output("output", f32, "N", 8).
		Node("Tanh", []string{"input_x"}, []string{"output"}).Write(model); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if _, err := bundlegen.FromONNX(context.Background(), model, plain, bundlegen.ONNXOptions{
		Model: "tests.Tanh", Ranges: []string{"input_x:1x8..4x8"}, Samples: 1, Seed: 1, IntHi: 9,
		Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	// The recorder's block goes into bundle.json.
	raw, err := os.ReadFile(filepath.Join(plain, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	m.AITune = json.RawMessage(aituneBlock)
	data, _ := m.Marshal()
	if err := os.WriteFile(filepath.Join(plain, bundle.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}

	env := startEmbedded(t)
	ctx := context.Background()
	sub, err := env.client.Submit(ctx, open(t, plain), submitOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	if st := wait(t, env.client.Runs(), sub.Run); st.Status != "done" {
		t.Fatalf("run %+v", st)
	}
	state, _, err := artifacts.ReadState(ctx, env.store, "tests.Tanh", "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	if state.AITune == nil || state.AITune.Error != "" || state.AITune.Name != "tests.Tanh" {
		t.Fatalf("state.aitune %+v", state.AITune)
	}
	out := filepath.Join(t.TempDir(), "ckpt")
	if _, err := artifacts.FetchCheckpoint(ctx, env.store, "tests.Tanh", "cpu", "", out); err != nil {
		t.Fatal(err)
	}
	// Replay ait.load's steps (unzip, verify sums, unpickle, relocate).
	probe, _ := filepath.Abs("../aitune/testdata/aitune_probe.py")
	res, err := exec.Command(py, probe, "load", out, "tests.Tanh", "1").Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var got struct {
		Backends []struct {
			Type      string
			Artifacts []struct{ Path, SHA256 string }
		}
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatalf("probe output %s: %v", res, err)
	}
	if len(got.Backends) != 1 || got.Backends[0].Type != "ONNXRuntimeBackend" || len(got.Backends[0].Artifacts) != 1 {
		t.Fatalf("loaded backends %+v", got.Backends)
	}
	// ONNX Runtime ships the bundle's own graph (the raw export).
	sum, _, _ := bundle.SHA256File(model)
	if a := got.Backends[0].Artifacts[0]; a.Path != "1/1/model_raw.onnx" || a.SHA256 != sum {
		t.Fatalf("artifact %+v, want the bundle's ONNX graph at 1/1/model_raw.onnx", a)
	}
}
