package aitune_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/aitune/aitunetest"
)

// Builders of the canonical form aitune_probe.py prints (see canon()
// there): Python values whose JSON form would be ambiguous are tagged.

func dict(kv ...any) any {
	items := []any{}
	for i := 0; i < len(kv); i += 2 {
		items = append(items, []any{kv[i], kv[i+1]})
	}
	return map[string]any{"$dict": items}
}

func tup(xs ...any) any  { return map[string]any{"$tuple": append([]any{}, xs...)} }
func list(xs ...any) any { return append([]any{}, xs...) }
func cls(name string, args ...any) any {
	return map[string]any{"$class": name, "args": append([]any{}, args...)}
}
func flt(repr string) any   { return map[string]any{"$float": repr} }
func dtype(name string) any { return map[string]any{"$dtype": name} }
func pkl(v any) any         { return map[string]any{"$pickle": v} }

// step is one (key, ObjectType(n)) pair of a locator's access path.
func step(key any, objectType int) any { return tup(key, cls("ObjectType", objectType)) }

func loc(isOutput bool, steps ...any) any { return cls("Locator", tup(steps...), isOutput) }

func art(rel string) any { return cls("ArtifactPath", ".", rel) }

const (
	seq = 0
	dct = 1
)

func sampleMetadataDict(tensors, others any) any {
	return dict("tensor_data", pkl(tensors), "other_data", pkl(others), "strict", true, "llm_phase", nil)
}

func sampleMetadataObject(tensors, others any) any {
	return cls("SampleMetadata", tensors, others, true, nil)
}

func param(name, kind string, def bool) any {
	return dict("name", name, "kind", kind, "has_default", def)
}

// trtConfig is TensorRTBackendConfig().to_dict() with AITune's defaults.
var trtConfig = dict(
	"use_dynamo", true, "workspace_size", nil, "opset_version", nil, "optimization_level", nil,
	"compatibility_level", nil, "timing_cache", nil, "profiles", "single", "device", "cuda",
	"quantization_config", nil, "enable_tf32", true, "use_cuda_graphs", false,
)

// wantTRT2 is the state of the TRT2 case, written out by hand from
// reference/aitune.md §2–§3 (not from the code under test).
func wantTRT2() any {
	fsig := dict("parameters", list(
		param("x", "POSITIONAL_OR_KEYWORD", false),
		param("mask", "POSITIONAL_OR_KEYWORD", true),
		param("return_dict", "KEYWORD_ONLY", true),
	))
	batch := cls("BatchDim", "batch", 1, 64, 8)
	side := cls("DynamicDim", "side", 8, 32, nil)
	dsX := tup(batch, 3, side, side)
	dsMask := tup(batch, 8)

	locX := loc(false, step("x", dct))
	locMask := loc(false, step("mask", dct))
	locReturnDict := loc(false, step("return_dict", dct))
	outLogits := loc(true, step("logits", dct))
	outHidden0 := loc(true, step("hidden", dct), step(0, seq))
	outHidden1 := loc(true, step("hidden", dct), step(1, seq))

	x0 := cls("TensorSpec", list("batch0", 3, 8, 8), list(1, 3, 8, 8), list(64, 3, 8, 8), dtype("float32"),
		list(flt("1.0"), flt("3.0"), flt("8.0"), flt("8.0")))
	mask0 := cls("TensorSpec", list("batch0", 8), list(1, 8), list(64, 8), dtype("int64"), list(flt("1.0"), flt("8.0")))
	x1 := cls("TensorSpec", list("batch0", 3, "dim2", "dim3"), list(1, 3, 8, 8), list(64, 3, 32, 32), dtype("float32"),
		list(flt("1.0"), flt("3.0"), flt("nan"), flt("nan")))
	logits := cls("TensorSpec", list("batch0", 10), list(1, 10), list(2, 10), dtype("float32"), list(flt("1.0"), flt("10.0")))
	hidden := cls("TensorSpec", list("batch0", 4, 16), list(1, 4, 16), list(2, 4, 16), dtype("float16"), list(flt("1.0"), flt("4.0"), flt("16.0")))

	in0 := tup(tup(locX, x0), tup(locMask, mask0))
	in1 := tup(tup(locX, x1))
	out := tup(tup(outLogits, logits), tup(outHidden0, hidden))
	outOther := tup(tup(outHidden1, 3))

	backend := func(k, name string, in, inOther, ds any) any {
		return dict(
			"type", "TensorRTBackend",
			"engine_path", art(k+"/1/tensorrt/model.plan"),
			"output_object", dict("logits", nil, "hidden", tup(nil, 3)),
			"graph_spec", dict(
				"type", "GraphSpec",
				"name", name,
				"input_spec", sampleMetadataObject(in, inOther),
				"output_spec", sampleMetadataObject(out, outOther),
				"forward_signature", fsig,
				"dynamic_shapes", ds,
			),
			"device", cls("torch.device", "cuda", 0),
			"quantization_config", nil,
			"config", trtConfig,
			"use_cuda_graphs", false,
			"trt_optimization_profiles_path", art(k+"/1/tensorrt/model_optimization_profiles.json"),
		)
	}
	return dict("", dict(
		"type", "Module",
		"name", "demo.TwoHeads",
		"dynamic_shapes", dict("x", dsX, "mask", dsMask),
		"tuned_module", dict(
			"backends", list(
				tup(sampleMetadataDict(in0, tup()), backend("1", "0", in0, tup(), dict("x", dsX, "mask", dsMask))),
				tup(sampleMetadataDict(in1, tup(tup(locReturnDict, true))), backend("2", "1", in1, tup(tup(locReturnDict, true)), dict("x", dsX))),
			),
			"check_graph", true,
			"is_any_jit", false,
			"module_name", "demo.TwoHeads",
			"forward_signature", fsig,
		),
	))
}

// wantORT1 is the state of the ORT1 case, by hand.
func wantORT1() any {
	fsig := dict("parameters", list(
		param("input_ids", "POSITIONAL_OR_KEYWORD", false),
		param("options", "POSITIONAL_OR_KEYWORD", false),
	))
	ids := cls("TensorSpec", list("batch0", "dim1"), list(1, 4), list(16, 128), dtype("int64"), list(flt("1.0"), flt("nan")))
	mask := cls("TensorSpec", list("batch0", "dim1"), list(1, 4), list(16, 128), dtype("bool"), list(flt("1.0"), flt("nan")))
	outSpec := cls("TensorSpec", list("batch0", "dim1", 16), list(1, 4, 16), list(2, 7, 16), dtype("float16"), list(flt("1.0"), flt("nan"), flt("16.0")))
	in := tup(
		tup(loc(false, step("input_ids", dct)), ids),
		tup(loc(false, step("options", dct), step("mask", dct)), mask),
	)
	out := tup(tup(loc(true), outSpec))
	return dict("", dict(
		"type", "Module",
		"name", "demo.Encoder",
		"dynamic_shapes", nil,
		"tuned_module", dict(
			"backends", list(tup(sampleMetadataDict(in, tup()), dict(
				"type", "ONNXRuntimeBackend",
				"config", dict("use_dynamo", true, "execution_provider", "tensorrt", "opset_version", nil),
				"onnx_model_path", art("1/1/model_raw.onnx"),
				"output_object", nil,
				"graph_spec", dict(
					"type", "GraphSpec",
					"name", "0",
					"input_spec", sampleMetadataObject(in, tup()),
					"output_spec", sampleMetadataObject(out, tup()),
					"forward_signature", fsig,
					"dynamic_shapes", dict(),
				),
				"device", cls("torch.device", "cuda", 1),
				"onnx_data_path", art("1/1/model_raw.onnx.data"),
			))),
			"check_graph", true,
			"is_any_jit", false,
			"module_name", "demo.Encoder",
			"forward_signature", fsig,
		),
	))
}

// TestStateObjectGraph unpickles state_dict.pt with Python's own pickle
// module (through stand-ins for the AITune and torch classes) and compares
// the exact object graph: classes, constructor arguments, dict keys and
// their order, nested pickles, artifact paths.
func TestStateObjectGraph(t *testing.T) {
	for _, tc := range []struct {
		c    aitunetest.Case
		want any
	}{{aitunetest.TRT2(), wantTRT2()}, {aitunetest.ORT1(), wantORT1()}} {
		t.Run(tc.c.Dir, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := tc.c.Write(dir); err != nil {
				t.Fatal(err)
			}
			out := runPython(t, nil, "testdata/aitune_probe.py", "state", filepath.Join(dir, tc.c.Checkpoint, "state_dict.pt"))
			sameJSON(t, "state_dict.pt", out, map[string]any{
				"folder": "state_dict",
				"records": list("state_dict/data.pkl", "state_dict/.format_version", "state_dict/.storage_alignment",
					"state_dict/byteorder", "state_dict/version", "state_dict/.data/serialization_id"),
				"state": tc.want,
			})
		})
	}
}

// TestStateKeepsModuleVersions: a block with module_versions gives the
// state dict torch.save would write for Module.state_dict(): an
// OrderedDict holding AITune's entry, with each submodule's version in its
// _metadata attribute, unpickled by Python's own pickle.
func TestStateKeepsModuleVersions(t *testing.T) {
	c := aitunetest.ORT1()
	c.Block = json.RawMessage(strings.Replace(string(c.Block), `"format": "aitune.block/v1",`,
		`"format": "aitune.block/v1", "module_versions": {"": 2, "layers": 1, "layers.0": 1},`, 1))
	dir := t.TempDir()
	if _, err := c.Write(dir); err != nil {
		t.Fatal(err)
	}
	out := runPython(t, nil, "testdata/aitune_probe.py", "state", filepath.Join(dir, c.Checkpoint, "state_dict.pt"))
	var got struct {
		State struct {
			ODict [][]json.RawMessage `json:"$odict"`
			Attrs struct {
				Metadata struct {
					ODict [][]json.RawMessage `json:"$odict"`
				} `json:"_metadata"`
			} `json:"$attrs"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.State.ODict) != 1 || string(got.State.ODict[0][0]) != `""` {
		t.Fatalf("state dict items = %s, want AITune's one \"\" entry", out)
	}
	var meta []string
	for _, kv := range got.State.Attrs.Metadata.ODict {
		meta = append(meta, string(kv[0])+"="+string(kv[1]))
	}
	want := []string{`""={"$dict": [["version", 2]]}`, `"layers"={"$dict": [["version", 1]]}`, `"layers.0"={"$dict": [["version", 1]]}`}
	if !slices.Equal(meta, want) {
		t.Errorf("_metadata = %q, want %q", meta, want)
	}
	// Without module_versions the state dict stays the plain dict the goldens hold.
	plain := t.TempDir()
	if _, err := aitunetest.ORT1().Write(plain); err != nil {
		t.Fatal(err)
	}
	if out := runPython(t, nil, "testdata/aitune_probe.py", "state", filepath.Join(plain, c.Checkpoint, "state_dict.pt")); !strings.Contains(string(out), `"state": {"$dict"`) {
		t.Errorf("a block without module_versions should give a plain dict: %.200s", out)
	}
}
