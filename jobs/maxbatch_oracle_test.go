package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// With --find-max-batch, finalize's AITune checkpoint carries the graph
// spec AITune's own tune would save: the same module tuned without the
// option, loaded through AITune's real ait.load, then extended by AITune's
// own GraphSpec.update_max_batch_size to the found batch
// (jobs/testdata/oracle_max_batch.py), equals the checkpoint tunefleet
// wrote with the option, tensor by tensor (labels, min, max, multipliers);
// and the found batch is above the recorded max of 4.
func TestFindMaxBatchCheckpointMatchesAITune(t *testing.T) {
	t.Parallel()
	orttest.Need(t)
	plain := tanhBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	fetch := func(find bool) (string, *tuner.Result) {
		o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
		o.FindMaxBatch = find
		sub, err := env.client.Submit(ctx, open(t, plain), o)
		if err != nil {
			t.Fatal(err)
		}
		if st := wait(t, env.client.Runs(), sub.Run); st.Status != "done" {
			t.Fatalf("run %+v", st)
		}
		st, _, err := artifacts.ReadState(ctx, env.store, "tests.Tanh", "cpu", sub.Run)
		if err != nil {
			t.Fatal(err)
		}
		if st.AITune == nil || st.AITune.Error != "" {
			t.Fatalf("state.aitune %+v", st.AITune)
		}
		var res tuner.Result
		if err := artifacts.GetJSON(ctx, env.store, st.Graphs[0].ResultKey, &res); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "ckpt")
		if _, err := artifacts.FetchCheckpoint(ctx, env.store, "tests.Tanh", "cpu", sub.Run, out); err != nil {
			t.Fatal(err)
		}
		return out, &res
	}
	recorded, _ := fetch(false)
	extended, res := fetch(true)
	if res.FoundMaxBatch <= 4 || res.FindMaxBatch == nil || !res.FindMaxBatch.Extended {
		t.Fatalf("found max batch %d (%+v): want one above the recorded 4 (the Tanh's throughput grows well past it)", res.FoundMaxBatch, res.FindMaxBatch)
	}
	t.Logf("found max batch %d in %s (%s)", res.FoundMaxBatch, res.FindMaxBatch.Duration, res.FindMaxBatch.Stop)
	raw := oracleScript(t, "testdata/oracle_max_batch.py", recorded, extended, fmt.Sprint(res.FoundMaxBatch))
	var got struct{ AITune, Tunefleet map[string]any }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("oracle output %s: %v", raw, err)
	}
	if len(got.AITune) != 1 || !reflect.DeepEqual(got.AITune, got.Tunefleet) {
		t.Fatalf("graph specs differ:\nAITune's update_max_batch_size: %v\ntunefleet's checkpoint:         %v", got.AITune, got.Tunefleet)
	}
	in := got.Tunefleet["0"].(map[string]any)["inputs"].([]any)[0].([]any)
	if fmt.Sprint(in[3]) != fmt.Sprintf("[%d 8]", res.FoundMaxBatch) {
		t.Errorf("input max_shape %v, want [%d 8]", in[3], res.FoundMaxBatch)
	}
}

// tanhBundle is a one-graph bundle of y = tanh(x), x [N, 8] recorded at
// 1..4, with the AITune recorder's block for forward(self, x); the ONNX
// file it was made from is tanh.onnx beside it.
func tanhBundle(t *testing.T) string {
	t.Helper()
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
	return plain
}

// oracleScript runs a Python script against AITune's real source (as
// aituneLoad does) and returns what it printed; it skips where torch or
// AITune is missing, except in CI.
func oracleScript(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	py := os.Getenv("TUNEFLEET_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	script, _ = filepath.Abs(script)
	cmd := exec.Command(py, append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.Is(err, exec.ErrNotFound) || (errors.As(err, &exit) && exit.ExitCode() == 3) {
		// make test-short runs before make python-deps (a fresh clone
		// works): only the full suite insists.
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("AITune cannot run (CI must have it; make python-deps): %v %s", err, stderr.String())
		}
		t.Skipf("AITune cannot run: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, stderr.String())
	}
	return out
}
