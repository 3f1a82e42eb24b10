package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
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
	t.Parallel()
	orttest.Need(t)
	// A Tanh graph whose bundle.json carries the recorder's block.
	plain := tanhBundle(t)
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
	// AITune's own ait.load, through deploy (python/tests/oracle_load.py).
	res := aituneLoad(t, out)
	var got struct {
		Backends []struct {
			Type      string
			Artifacts []struct{ Path, SHA256 string }
			Session   struct{ Path string }
		}
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatalf("oracle_load output %s: %v", res, err)
	}
	if len(got.Backends) != 1 || got.Backends[0].Type != "ONNXRuntimeBackend" || len(got.Backends[0].Artifacts) != 1 {
		t.Fatalf("loaded backends %+v", got.Backends)
	}
	// Deploy opened the ONNX Runtime session on the relocated model.
	if s := got.Backends[0].Session; s.Path != "1/1/model_raw.onnx" {
		t.Fatalf("session %+v, want one on 1/1/model_raw.onnx", s)
	}
	// ONNX Runtime ships the bundle's own graph (the raw export).
	sum, _, _ := bundle.SHA256File(filepath.Join(filepath.Dir(plain), "tanh.onnx")) // tanhBundle's source
	if a := got.Backends[0].Artifacts[0]; a.Path != "1/1/model_raw.onnx" || a.SHA256 != sum {
		t.Fatalf("artifact %+v, want the bundle's ONNX graph at 1/1/model_raw.onnx", a)
	}
}

// aituneLoad loads the checkpoint fetched into dir with AITune's real
// ait.load (python/tests/oracle_load.py, Debian's torch, AITune's source
// from ../shared/oracles) and returns what it printed. Without torch or
// AITune it skips, except in CI, where `make test` installs them first
// (make python-deps).
func aituneLoad(t *testing.T, dir string) []byte {
	t.Helper()
	py := os.Getenv("TUNEFLEET_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	script, _ := filepath.Abs("../python/tests/oracle_load.py")
	cmd := exec.Command(py, script, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.Is(err, exec.ErrNotFound) || (errors.As(err, &exit) && exit.ExitCode() == 3) {
		// make test-short runs before make python-deps (a fresh clone
		// works): only the full suite insists.
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("AITune's loader cannot run (CI must have it; make python-deps): %v %s", err, stderr.String())
		}
		t.Skipf("AITune's loader cannot run: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, stderr.String())
	}
	return out
}
