package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
)

// matmulBlock is the recorder's block for `def forward(self, x)` of a
// module holding a weight (x @ w).
const matmulBlock = `{
  "format": "aitune.block/v1",
  "name": "tests.MatMul",
  %s
  "forward_signature": {"parameters": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}]},
  "graphs": {"0": {
    "inputs": [{"name": "input_x", "path": [["x", "DICT"]]}],
    "outputs": [{"name": "output", "path": []}]
  }}
}`

// matmulBundle writes a bundle of x @ w whose weight w is ONNX external
// data in graphs/0/weights/w.bin, with the aitune block (extra: more block
// fields, e.g. `"gpu_winners_only": true,`).
func matmulBundle(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "matmul.onnx")
	f32 := onnxpb.TensorProto_FLOAT
	if err := onnxtest.New("matmul", 13).Input("input_x", f32, "N", 4).Random("w", 0.5, 4, 3).
		Output("output", f32, "N", 3).Node("MatMul", []string{"input_x", "w"}, []string{"output"}).Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Model: "tests.MatMul", Ranges: []string{"input_x:1x4..4x4"}, Samples: 1, Seed: 1, IntHi: 9,
		Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, bundle.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	bundletest.Externalize(t, filepath.Join(out, filepath.FromSlash(m.Graphs[0].ONNX)), "weights/w.bin", true)
	m.AITune = json.RawMessage(strings.Replace(matmulBlock, "%s", extra, 1))
	bundletest.WriteManifest(t, out, m)
	return out
}

// storedDoc reads a stored JSON document and validates it against its
// published schema.
func storedDoc(t *testing.T, store artifacts.Store, key string, doc schemas.Doc) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.ValidateJSON(doc, "", raw); err != nil {
		t.Errorf("%s does not validate against %s: %v", key, doc, err)
	}
	return raw
}

// An ort:cpu winner deploys on CUDA in AITune: the state says so, and the
// checkpoint ships the graph's external data as AITune's ORT backend loads
// it (model_raw.onnx naming model_raw.onnx.data beside it), which ONNX
// Runtime then runs to the same outputs as the bundle's model.
func TestCheckpointOfAnORTWinnerWithExternalData(t *testing.T) {
	t.Parallel()
	env, dir, _, ms := tuneMatMul(t, "")
	ctx := context.Background()
	storedDoc(t, env.store, artifacts.LatestKey("tests.MatMul", "cpu"), schemas.Latest)
	for _, sg := range ms.Graphs {
		storedDoc(t, env.store, sg.ResultKey, schemas.Result) // what the worker's tuner wrote
	}
	cp := ms.AITune
	if cp == nil || cp.Error != "" || cp.Skipped != "" || len(cp.Files) == 0 {
		t.Fatalf("state.aitune %+v", cp)
	}
	if len(cp.Unmeasured) != 1 || cp.Unmeasured[0].Graph != "0" || cp.Unmeasured[0].Candidate != "ort:cpu:basic" || !strings.Contains(cp.Unmeasured[0].DeploysOn, "CUDA") {
		t.Errorf("state.aitune.unmeasured = %+v, want graph 0 won as ort:cpu:basic, deployed on CUDA", cp.Unmeasured)
	}
	out := filepath.Join(t.TempDir(), "ckpt")
	if _, err := artifacts.FetchCheckpoint(ctx, env.store, "tests.MatMul", "cpu", "", out); err != nil {
		t.Fatal(err)
	}
	shipped := filepath.Join(out, "tests.MatMul", "1", "1", "model_raw.onnx")
	io, err := bundle.ReadGraphIO(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(io.ExternalData, []string{"model_raw.onnx.data"}) {
		t.Fatalf("the shipped model keeps its weights in %q, want model_raw.onnx.data (what AITune's backend ships)", io.ExternalData)
	}
	if !slices.ContainsFunc(cp.Files, func(f state.CheckpointFile) bool { return f.Path == "tests.MatMul/1/1/model_raw.onnx.data" }) {
		t.Errorf("checkpoint files %+v lack the external data", cp.Files)
	}
	// ONNX Runtime runs the shipped model to the bundle's reference outputs.
	b := open(t, dir)
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := b.Manifest.Graph("0")
	cand, _ := backend.ParseCandidate("ort:cpu:disabled")
	eng, err := ort.New(ort.Options{}).Build(ctx, backend.BuildRequest{
		Model: "tests.MatMul", Graph: g, ONNXPath: shipped, Profile: ms.Graphs[0].Profile, Candidate: cand, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("ONNX Runtime cannot build the shipped model: %v", err)
	}
	defer eng.Close()
	got, err := eng.Run(ctx, samples[0].Inputs, backend.OutputSpecsLike(samples[0].Outputs))
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0].Data) != string(samples[0].Outputs[0].Data) {
		t.Error("the shipped model's output differs from the reference output")
	}
}

// tuneMatMul tunes matmulBundle(extra) to done (first-wins, ort:cpu:basic)
// on an embedded queue and returns the bundle, its run and the state
// finalize stored (checked against its schema).
func tuneMatMul(t *testing.T, extra string) (env *env, dir, run string, ms *state.State) {
	t.Helper()
	orttest.Need(t)
	dir = matmulBundle(t, extra)
	env = startEmbedded(t)
	ctx := context.Background()
	sub, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	if st := wait(t, env.client.Runs(), sub.Run); st.Status != "done" {
		t.Fatalf("run %+v", st)
	}
	storedDoc(t, env.store, artifacts.StateKey(sub.Run), schemas.State)
	ms, _, err = artifacts.ReadState(ctx, env.store, "tests.MatMul", "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	return env, dir, sub.Run, ms
}

// A block that asks for GPU-class winners only gets no checkpoint from an
// ort:cpu winner, and the state says why.
func TestCheckpointSkippedForCPUWinners(t *testing.T) {
	t.Parallel()
	env, _, run, ms := tuneMatMul(t, `"gpu_winners_only": true,`)
	ctx := context.Background()
	cp := ms.AITune
	if cp == nil || len(cp.Files) != 0 || !strings.Contains(cp.Skipped, "gpu_winners_only") || !strings.Contains(cp.Skipped, "graph 0 won as ort:cpu:basic") {
		t.Fatalf("state.aitune %+v, want no files and the reason", cp)
	}
	if keys, _ := env.store.List(ctx, "runs/"+run+"/aitune/"); len(keys) != 0 {
		t.Errorf("checkpoint files were uploaded: %v", keys)
	}
	if _, err := artifacts.FetchCheckpoint(ctx, env.store, "tests.MatMul", "cpu", "", filepath.Join(t.TempDir(), "ckpt")); err == nil {
		t.Error("fetching a skipped checkpoint succeeded")
	}
}
