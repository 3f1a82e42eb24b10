package aitune_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	. "github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/aitune/aitunetest"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

func entry(t *onnxpb.TensorProto, key string) string {
	for _, e := range t.GetExternalData() {
		if e.GetKey() == key {
			return e.GetValue()
		}
	}
	return ""
}

// externalModel writes a model with two weights kept as external data in
// two files, a.bin and sub/b.bin (w2 at offset 0 of b.bin, no offset
// entry), and returns the model's path and each weight's bytes.
func externalModel(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "model.onnx")
	f32 := onnxpb.TensorProto_FLOAT
	if err := onnxtest.New("two", 13).Input("input_x", f32, "N", 4).Random("w1", 0.5, 4, 4).Random("w2", 0.5, 4, 3).
		Output("output", f32, "N", 3).Node("MatMul", []string{"input_x", "w1"}, []string{"h"}).Node("MatMul", []string{"h", "w2"}, []string{"output"}).
		Write(model); err != nil {
		t.Fatal(err)
	}
	bundletest.Externalize(t, model, "a.bin", true)
	raw, _ := os.ReadFile(model)
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.bin"))
	weights := map[string][]byte{}
	for _, init := range m.GetGraph().GetInitializer() {
		off, _ := strconv.Atoi(entry(init, "offset"))
		n, _ := strconv.Atoi(entry(init, "length"))
		weights[init.GetName()] = a[off : off+n]
		if init.GetName() == "w2" {
			init.ExternalData = []*onnxpb.StringStringEntryProto{
				{Key: proto.String("location"), Value: proto.String("sub/./b.bin")},
				{Key: proto.String("length"), Value: proto.String(strconv.Itoa(n))},
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "b.bin"), weights["w2"], 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := proto.Marshal(&m)
	if err := os.WriteFile(model, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return model, weights
}

// The checkpoint ships external data as AITune's ORT backend has it: one
// model_raw.onnx.data beside model_raw.onnx, which the model names, at the
// offsets the rewritten model gives; the state names it as onnx_data_path.
func TestWriteRelocatesExternalData(t *testing.T) {
	model, weights := externalModel(t)
	c := aitunetest.ORT1()
	block, err := ParseBlock(c.Block, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	decl, _ := c.Manifest.Graph("0")
	dir := filepath.Dir(model)
	g := Graph{Name: "0", Backend: BackendORT, Decl: decl, EngineFile: model, ExternalData: []ExternalFile{
		{Location: "a.bin", Path: filepath.Join(dir, "a.bin")},
		{Location: "sub/b.bin", Path: filepath.Join(dir, "sub", "b.bin")},
	}}
	out := t.TempDir()
	man, err := Write(out, "enc", block, []Graph{g}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := man.Backends[0].Artifacts; len(a) != 2 || a[1] != "1/1/model_raw.onnx.data" {
		t.Fatalf("artifacts %v, want the model and 1/1/model_raw.onnx.data", a)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "enc", "1", "1", "model_raw.onnx"))
	data, _ := os.ReadFile(filepath.Join(out, "enc", "1", "1", "model_raw.onnx.data"))
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, init := range m.GetGraph().GetInitializer() {
		off, _ := strconv.Atoi(entry(init, "offset"))
		n, _ := strconv.Atoi(entry(init, "length"))
		if loc := entry(init, "location"); loc != "model_raw.onnx.data" || off%4096 != 0 && init.GetName() == "w2" {
			t.Errorf("%s: location %q offset %d", init.GetName(), loc, off)
		}
		if off+n > len(data) || !bytes.Equal(data[off:off+n], weights[init.GetName()]) {
			t.Errorf("%s: the data at offset %d is not the weight's", init.GetName(), off)
		}
	}
	state, _ := os.ReadFile(filepath.Join(out, "enc", "state_dict.pt"))
	if !bytes.Contains(state, []byte("onnx_data_path")) {
		t.Error("state_dict.pt does not name onnx_data_path")
	}

	// A location the caller did not give is refused, and nothing is written.
	g.ExternalData = g.ExternalData[:1]
	out = t.TempDir()
	if _, err := Write(out, "enc", block, []Graph{g}, Options{}); err == nil || !strings.Contains(err.Error(), `tensor "w2" keeps its data in "sub/./b.bin", which is not among the graph's external data files`) {
		t.Errorf("err = %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a failed Write left %d entries", len(entries))
	}
}

// pythonWithONNX is the python3 that has Debian's python3-onnx (the
// Makefile's PYTHON, or $TUNEFLEET_PYTHON); without it the test skips,
// except in CI, where make python-deps installs it.
func pythonWithONNX(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TUNEFLEET_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := exec.Command(py, "-c", "import onnx, numpy").Run(); err != nil {
		// make test-short runs before make python-deps (a fresh clone
		// works): only the full suite insists.
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("%s cannot import onnx (CI must have it; make python-deps): %v", py, err)
		}
		t.Skipf("%s cannot import onnx: %v", py, err)
	}
	return py
}

// A checkpoint's relocated external data reads back right through
// onnx.load, which takes a tensor without a length to the end of its file:
// every relocated tensor carries offset and length, and every tensor
// onnx.load gives is bit for bit the original's — also when the model the
// engine came from gave no lengths (w1 shares a.bin with other data).
func TestRelocatedExternalDataLoadsWithONNX(t *testing.T) {
	py := pythonWithONNX(t)
	model, weights := externalModel(t)
	// Drop every length, as writers that rely on "to the end of the file"
	// do.
	raw, _ := os.ReadFile(model)
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, init := range m.GetGraph().GetInitializer() {
		var kept []*onnxpb.StringStringEntryProto
		for _, e := range init.ExternalData {
			if e.GetKey() != "length" {
				kept = append(kept, e)
			}
		}
		init.ExternalData = kept
	}
	raw, _ = proto.Marshal(&m)
	if err := os.WriteFile(model, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c := aitunetest.ORT1()
	block, err := ParseBlock(c.Block, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	decl, _ := c.Manifest.Graph("0")
	dir := filepath.Dir(model)
	g := Graph{Name: "0", Backend: BackendORT, Decl: decl, EngineFile: model, ExternalData: []ExternalFile{
		{Location: "a.bin", Path: filepath.Join(dir, "a.bin")},
		{Location: "sub/b.bin", Path: filepath.Join(dir, "sub", "b.bin")},
	}}
	out := t.TempDir()
	if _, err := Write(out, "enc", block, []Graph{g}, Options{}); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(out, "enc", "1", "1", "model_raw.onnx")
	got := runPythonWith(t, py, `
import json, sys, onnx
from onnx import numpy_helper
refs = onnx.load(sys.argv[1], load_external_data=False)
m = onnx.load(sys.argv[1])
out = {}
for r, t in zip(refs.graph.initializer, m.graph.initializer):
    ext = {e.key: e.value for e in r.external_data}
    out[t.name] = {"bytes": numpy_helper.to_array(t).tobytes().hex(), "length": ext.get("length", ""), "location": ext.get("location", "")}
print(json.dumps(out))
`, ckpt)
	var loaded map[string]struct{ Bytes, Length, Location string }
	if err := json.Unmarshal(got, &loaded); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if len(loaded) != len(weights) {
		t.Fatalf("onnx.load gave %d tensors, want %d", len(loaded), len(weights))
	}
	for name, w := range weights {
		l := loaded[name]
		if l.Location != "model_raw.onnx.data" || l.Length != strconv.Itoa(len(w)) {
			t.Errorf("%s: location %q length %q, want model_raw.onnx.data and %d", name, l.Location, l.Length, len(w))
		}
		if l.Bytes != hex.EncodeToString(w) {
			t.Errorf("%s: onnx.load gives other bytes than the original tensor's", name)
		}
	}
}

// runPythonWith runs a python script (-c) with interpreter py.
func runPythonWith(t *testing.T, py, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, stderr.String())
	}
	return out
}
