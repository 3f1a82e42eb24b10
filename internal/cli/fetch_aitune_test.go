package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// `fetch --format aitune` of a checkpoint whose graph won on the CPU says
// which name ait.load takes and that the graph deploys on a provider that
// was never measured.
func TestFetchAITuneWarnsOfCPUWinners(t *testing.T) {
	t.Parallel()
	needORT(t)
	for _, gpuOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("gpu_winners_only=%v", gpuOnly), func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, "tanh.onnx")
			f32 := onnxpb.TensorProto_FLOAT
			if err := onnxtest.New("tanh", 13).Input("input_x", f32, "N", 8).Output("output", f32, "N", 8).
				Node("Tanh", []string{"input_x"}, []string{"output"}).Write(model); err != nil {
				t.Fatal(err)
			}
			b := filepath.Join(dir, "bundle")
			producer(t, "bundle", "from-onnx", model, "--shape", "input_x:1x8..4x8", "--model", "tests.Tanh", "--out", b).wantCode(t, cli.ExitOK)
			bundletest.EditManifest(t, b, func(m *bundle.Manifest) {
				m.AITune = json.RawMessage(fmt.Sprintf(`{"format": "aitune.block/v1", "name": "tanh_module", "gpu_winners_only": %v,
				  "forward_signature": {"parameters": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}]},
				  "graphs": {"0": {"inputs": [{"name": "input_x", "path": [["x", "DICT"]]}], "outputs": [{"name": "output", "path": []}]}}}`, gpuOnly))
			})
			store := "file://" + filepath.Join(dir, "store")
			producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store).wantCode(t, cli.ExitOK)
			o := producer(t, "fetch", "tests.Tanh", "--platform", "cpu", "--format", "aitune", "--store", store, "--out", filepath.Join(dir, "ckpt"))
			if gpuOnly {
				o.wantError(t, "producer", cli.ExitFailed, "has no AITune checkpoint", "gpu_winners_only", "graph 0 won as ort:cpu:basic")
				return
			}
			o.wantCode(t, cli.ExitOK)
			for _, w := range []string{
				`ait.load(module, "tanh_module", storage=LocalTorchStorage(base_folder=`,
				"warning: graph 0 won as ort:cpu:basic, but AITune runs it on ONNX Runtime's CUDA execution provider",
				"which was never measured",
			} {
				if !strings.Contains(o.stdout, w) {
					t.Errorf("fetch output does not say %q:\n%s", w, o.stdout)
				}
			}
		})
	}
}
