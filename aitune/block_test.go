package aitune_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	. "github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/aitune/aitunetest"
	"github.com/tunefleet/tunefleet/bundle"
)

func TestParseBlockNone(t *testing.T) {
	m := aitunetest.TRT2().Manifest
	for _, raw := range []string{"", "  ", "null"} {
		b, err := ParseBlock(json.RawMessage(raw), m)
		if b != nil || err != nil {
			t.Errorf("ParseBlock(%q) = %v, %v; want nil, nil (no block)", raw, b, err)
		}
	}
}

func TestParseBlockTRT2(t *testing.T) {
	c := aitunetest.TRT2()
	b, err := ParseBlock(c.Block, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "demo.TwoHeads" || len(b.Parameters) != 3 || b.Parameters[2] != (Parameter{"return_dict", "KEYWORD_ONLY", true}) {
		t.Errorf("module: %q %+v", b.Name, b.Parameters)
	}
	if len(b.Graphs) != 2 || b.Graphs[0].Graph != "0" || b.Graphs[1].Graph != "1" {
		t.Fatalf("graphs not in bundle order: %+v", b.Graphs)
	}
	g0, g1 := b.Graphs[0], b.Graphs[1]
	if g0.SpecName != "0" || !g0.Strict || g0.LLMPhase != "" {
		t.Errorf("graph 0 defaults: %+v", g0)
	}
	if got := g0.Inputs[0].Multipliers; len(got) != 4 || got[3] != 8 {
		t.Errorf("explicit bs_multipliers: %v", got)
	}
	if g0.Inputs[1].Multipliers != nil {
		t.Errorf("default multipliers should stay nil, got %v", g0.Inputs[1].Multipliers)
	}
	if l := g0.Outputs[1].Locator; l.TensorName() != "output_hidden_0" || !l.IsOutput || len(l.Path) != 2 || l.Path[1] != (Step{Index(0), Sequence}) {
		t.Errorf("output locator: %+v", l)
	}
	// The skeleton's non-tensor leaf becomes the output's other data.
	if len(g0.OtherOutputs) != 1 || g0.OtherOutputs[0].Value != (Scalar{Kind: ScalarInt, Int: 3}) || g0.OtherOutputs[0].Locator.String() != `output["hidden"][1]` {
		t.Errorf("other outputs: %+v", g0.OtherOutputs)
	}
	if len(g1.OtherInputs) != 1 || g1.OtherInputs[0].Value != (Scalar{Kind: ScalarBool, Bool: true}) {
		t.Errorf("other inputs: %+v", g1.OtherInputs)
	}
	// Dynamic shapes come from bundle.json through the locators, in graph
	// and input order; graph 1 has only x.
	if len(b.DynamicShapes) != 2 || b.DynamicShapes[0].Path[0] != Name("x") || b.DynamicShapes[1].Path[0] != Name("mask") {
		t.Fatalf("module dynamic shapes: %+v", b.DynamicShapes)
	}
	batch := b.DynamicShapes[0].Dims[0]
	if !batch.Batch || batch.Name != "batch" || batch.Min != 1 || batch.Max != 64 || batch.Opt == nil || *batch.Opt != 8 {
		t.Errorf("batch dim: %+v", batch)
	}
	if side := b.DynamicShapes[0].Dims[2]; side.Batch || side.Opt != nil || side.Name != "side" {
		t.Errorf("side dim: %+v", side)
	}
	if len(g0.DynamicShapes) != 2 || len(g1.DynamicShapes) != 1 {
		t.Errorf("graph dynamic shapes: %d and %d entries", len(g0.DynamicShapes), len(g1.DynamicShapes))
	}
}

func TestParseBlockORT1(t *testing.T) {
	c := aitunetest.ORT1()
	b, err := ParseBlock(c.Block, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	// The name defaults to the bundle's model; no dynamic shapes anywhere
	// means Module(dynamic_shapes=None).
	if b.Name != "demo.Encoder" || b.DynamicShapes != nil {
		t.Errorf("name %q, dynamic shapes %v", b.Name, b.DynamicShapes)
	}
	g := b.Graphs[0]
	if g.Skeleton.Kind != SkeletonLeaf || g.Skeleton.Leaf.Kind != ScalarNone || len(g.OtherOutputs) != 0 {
		t.Errorf("bare-tensor output: skeleton %+v, other %+v", g.Skeleton, g.OtherOutputs)
	}
}

// mutate applies f to the JSON of a case's block.
func mutate(t *testing.T, raw json.RawMessage, f func(b map[string]any)) json.RawMessage {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	f(b)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// at walks a decoded JSON value by object keys and array indices.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func obj(v any) map[string]any { return v.(map[string]any) }

func TestParseBlockExplicitDynamicShapes(t *testing.T) {
	c := aitunetest.TRT2()
	consistent := `[
	  {"path": "x", "shape": [{"type": "BatchDim", "name": "batch", "min": 1, "max": 64, "opt": 8}, 3,
	    {"type": "DynamicDim", "name": "side", "min": 8, "max": 32}, {"type": "DynamicDim", "name": "side", "min": 8, "max": 32, "opt": null}]},
	  {"path": "mask", "shape": [{"type": "BatchDim", "name": "batch", "min": 1, "max": 64, "opt": 8}, 8]}
	]`
	raw := mutate(t, c.Block, func(b map[string]any) { b["dynamic_shapes"] = json.RawMessage(consistent) })
	b, err := ParseBlock(raw, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.DynamicShapes) != 2 || len(b.DynamicShapes[0].Dims) != 4 {
		t.Errorf("dynamic shapes: %+v", b.DynamicShapes)
	}
}

func TestParseBlockLLMPhase(t *testing.T) {
	c := aitunetest.ORT1()
	raw := mutate(t, c.Block, func(b map[string]any) {
		ps := at(b, "forward_signature", "parameters").([]any)
		obj(at(b, "forward_signature"))["parameters"] = append(ps, map[string]any{"name": "cache_position", "kind": "POSITIONAL_OR_KEYWORD", "has_default": true})
		g := obj(at(b, "graphs", "0"))
		g["llm_phase"], g["graph_spec_name"] = "prefill", "0 (LLM phase prefill)"
	})
	b, err := ParseBlock(raw, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if g := b.Graphs[0]; g.LLMPhase != "prefill" || g.SpecName != "0 (LLM phase prefill)" {
		t.Errorf("graph: %+v", g)
	}
}

func TestParseBlockMultipliers(t *testing.T) {
	c := aitunetest.TRT2()
	raw := mutate(t, c.Block, func(b map[string]any) {
		obj(at(b, "graphs", "1", "inputs", 0))["bs_multipliers"] = []any{2, 3, nil, nil}
	})
	b, err := ParseBlock(raw, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Graphs[1].Inputs[0].Multipliers
	if m[0] != 2 || m[1] != 3 || !math.IsNaN(m[2]) || !math.IsNaN(m[3]) {
		t.Errorf("multipliers %v", m)
	}
}

func TestParseBlockMalformed(t *testing.T) {
	trt, ort := aitunetest.TRT2(), aitunetest.ORT1()
	type tc struct {
		name string
		raw  func(t *testing.T) json.RawMessage
		m    bundle.Manifest
		want []string // substrings, each in some problem (JSON path first)
	}
	rawText := func(s string) func(*testing.T) json.RawMessage {
		return func(*testing.T) json.RawMessage { return json.RawMessage(s) }
	}
	onTRT := func(f func(b map[string]any)) func(*testing.T) json.RawMessage {
		return func(t *testing.T) json.RawMessage { return mutate(t, trt.Block, f) }
	}
	onORT := func(f func(b map[string]any)) func(*testing.T) json.RawMessage {
		return func(t *testing.T) json.RawMessage { return mutate(t, ort.Block, f) }
	}
	param := func(b map[string]any, i int) map[string]any { return obj(at(b, "forward_signature", "parameters", i)) }
	addParam := func(b map[string]any, name, kind string, def bool) {
		fs := obj(at(b, "forward_signature"))
		fs["parameters"] = append(fs["parameters"].([]any), map[string]any{"name": name, "kind": kind, "has_default": def})
	}
	tests := []tc{
		{"invalid JSON", rawText(`{"format": `), trt.Manifest, []string{"aitune.format: invalid JSON: unexpected end of input"}},
		{"not an object", rawText(`[1]`), trt.Manifest, []string{"aitune: want an object, got an array"}},
		{"duplicate key", rawText(`{"format": "aitune.block/v1", "format": "x"}`), trt.Manifest, []string{`aitune: key "format" appears twice`}},
		{"wrong format", onTRT(func(b map[string]any) { b["format"] = "aitune.block/v2" }), trt.Manifest,
			[]string{`aitune.format: is "aitune.block/v2", want "aitune.block/v1"`}},
		{"missing format", onTRT(func(b map[string]any) { delete(b, "format") }), trt.Manifest, []string{"aitune: format is missing"}},
		{"unknown field", onTRT(func(b map[string]any) { b["forward"] = 1 }), trt.Manifest, []string{"aitune.forward: unknown field (want one of format, name,"}},
		{"unknown field in a graph", onTRT(func(b map[string]any) { obj(at(b, "graphs", "0"))["skeleton"] = nil }), trt.Manifest,
			[]string{`aitune.graphs["0"].skeleton: unknown field`}},
		{"module name with a slash", onTRT(func(b map[string]any) { b["name"] = "a/b" }), trt.Manifest, []string{`aitune.name: is "a/b"; want a non-empty AITune module name without '/'`}},
		{"missing forward signature", onTRT(func(b map[string]any) { delete(b, "forward_signature") }), trt.Manifest, []string{"aitune: forward_signature is missing"}},
		{"graph not in the bundle", onTRT(func(b map[string]any) { obj(b["graphs"])["7"] = at(b, "graphs", "0") }), trt.Manifest,
			[]string{`aitune.graphs["7"]: names graph "7", which the bundle does not declare (graphs: "0", "1")`}},
		{"bundle graph not described", onTRT(func(b map[string]any) { delete(obj(b["graphs"]), "1") }), trt.Manifest,
			[]string{`aitune.graphs: graph "1" of the bundle is not described`}},
		{"declared input without a locator", onTRT(func(b map[string]any) {
			g := obj(at(b, "graphs", "0"))
			g["inputs"] = g["inputs"].([]any)[:1]
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs: declared input "input_mask" has no locator`}},
		{"locator for an undeclared tensor", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "1", "inputs", 0))["name"] = "input_mask"
		}), trt.Manifest, []string{`aitune.graphs["1"].inputs[0].name: "input_mask" is not an input the bundle declares for this graph ("input_x")`,
			`aitune.graphs["1"].inputs: declared input "input_x" has no locator`}},
		{"name breaks the naming contract", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 1))["path"] = []any{[]any{"x", "DICT"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[1]: path x names the tensor "input_x" under AITune's naming contract, not "input_mask"`}},
		{"input path not starting at a parameter", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["path"] = []any{[]any{"y", "DICT"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].path[0]: "y" is not a parameter of the forward signature`}},
		{"input path not a DICT step first", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["path"] = []any{[]any{0, "SEQUENCE"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].path[0]: an input path starts with its forward parameter as a DICT step`}},
		{"SEQUENCE step with a string", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "outputs", 1))["path"] = []any{[]any{"hidden", "DICT"}, []any{"0", "SEQUENCE"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].outputs[1].path[1][0]: want an integer, got a string`}},
		{"unknown step type", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["path"] = []any{[]any{"x", "LIST"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].path[0][1]: is "LIST", want "SEQUENCE", "DICT", "DATACLASS" or "USER_TYPE"`}},
		{"malformed step", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["path"] = []any{"x"}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].path[0]: want an array, got a string`}},
		{"dataclass output", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "outputs", 0))["path"] = []any{[]any{"logits", "DATACLASS"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].outputs[0].path[0]: outputs inside a DATACLASS cannot be rebuilt outside Python`}},
		{"non-default parameter after a default one", onTRT(func(b map[string]any) { addParam(b, "z", "POSITIONAL_OR_KEYWORD", false) }), trt.Manifest,
			[]string{"aitune.forward_signature.parameters[3].kind: wrong parameter order: POSITIONAL_OR_KEYWORD parameter \"z\" after a KEYWORD_ONLY parameter"}},
		{"non-default positional after default", onTRT(func(b map[string]any) { param(b, 0)["has_default"], param(b, 1)["has_default"] = true, false }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[1].has_default: non-default argument "mask" follows default argument`}},
		{"unknown kind", onTRT(func(b map[string]any) { param(b, 1)["kind"] = "POSITIONAL" }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[1].kind: is "POSITIONAL", want "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY" or "VAR_KEYWORD"`}},
		{"keyword as a parameter name", onTRT(func(b map[string]any) { param(b, 2)["name"] = "class" }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[2].name: "class" is not a valid Python parameter name`}},
		{"duplicate parameter", onTRT(func(b map[string]any) { param(b, 1)["name"] = "x" }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[1].name: duplicate parameter name "x"`}},
		{"var keyword with a default", onTRT(func(b map[string]any) { addParam(b, "kw", "VAR_KEYWORD", true) }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[3].has_default: VAR_KEYWORD parameters cannot have default values`}},
		{"parameter missing has_default", onTRT(func(b map[string]any) { delete(param(b, 0), "has_default") }), trt.Manifest,
			[]string{`aitune.forward_signature.parameters[0]: has_default is missing`}},
		{"var positional path without an index", onTRT(func(b map[string]any) {
			param(b, 1)["kind"], param(b, 1)["has_default"] = "VAR_POSITIONAL", false
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[1].path: *mask collects a tuple`}},
		{"tensor place not null in the skeleton", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "output_skeleton", "dict"))["logits"] = 5
		}), trt.Manifest, []string{`aitune.graphs["0"].outputs[0].path: output["logits"] holds 5 in output_skeleton; a tensor's place holds null`}},
		{"locator missing from the skeleton", onTRT(func(b map[string]any) {
			d := obj(at(b, "graphs", "1", "output_skeleton", "dict"))
			d["logit"] = d["logits"]
			delete(d, "logits")
		}), trt.Manifest, []string{`aitune.graphs["1"].outputs[0].path: output["logits"] in output_skeleton: step 0: no key "logits"`}},
		{"locator ends on a container", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "output_skeleton", "dict"))["logits"] = map[string]any{"list": []any{nil}}
		}), trt.Manifest, []string{`output["logits"] is a container in output_skeleton`}},
		{"index out of range", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "output_skeleton", "dict"))["hidden"] = map[string]any{"tuple": []any{}}
		}), trt.Manifest, []string{`step 1: index 0 is out of range (0 items)`}},
		{"missing skeleton for a container output", onTRT(func(b map[string]any) { delete(obj(at(b, "graphs", "0")), "output_skeleton") }), trt.Manifest,
			[]string{`output["logits"] in output_skeleton: step 0: a DICT step meets a leaf`}},
		{"class on a list", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "output_skeleton", "dict"))["hidden"] = map[string]any{"list": []any{nil, 3}, "class": map[string]any{"module": "m", "qualname": "L"}}
		}), trt.Manifest, []string{`aitune.graphs["0"].output_skeleton.dict.hidden: is not allowed here`}},
		{"state without a class", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0"))["output_skeleton"] = map[string]any{"dict": map[string]any{"logits": nil, "hidden": map[string]any{"tuple": []any{nil, 3}}}, "state": map[string]any{"dict": map[string]any{}}}
		}), trt.Manifest, []string{`aitune.graphs["0"].output_skeleton: class is missing (state needs it)`}},
		{"nested class name", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "output_skeleton"))["class"] = map[string]any{"module": "m", "qualname": "Outer.Inner"}
		}), trt.Manifest, []string{`aitune.graphs["0"].output_skeleton.class.qualname: is "Outer.Inner"; want a module-level class name`}},
		{"state that is not a dict", onTRT(func(b map[string]any) {
			sk := obj(at(b, "graphs", "0", "output_skeleton"))
			sk["class"] = map[string]any{"module": "collections", "qualname": "OrderedDict"}
			sk["state"] = map[string]any{"list": []any{}}
		}), trt.Manifest, []string{`aitune.graphs["0"].output_skeleton.state: want a plain dict of the instance's attributes`}},
		{"unknown skeleton container", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0"))["output_skeleton"] = map[string]any{"set": []any{}}
		}), trt.Manifest, []string{`aitune.graphs["0"].output_skeleton.set: unknown field (want one of list, tuple, dict, class, state)`}},
		{"bs_multipliers of the wrong length", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["bs_multipliers"] = []any{1, 3, 8}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].bs_multipliers: has 3 entries, tensor "input_x" has rank 4`}},
		{"fractional batch multiplier", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["bs_multipliers"] = []any{1.5, 3, 8, 8}
		}), trt.Manifest, []string{`aitune.graphs["0"].inputs[0].bs_multipliers[0]: axis 0 is a batch axis (batch0): its multiplier must be a positive integer, got 1.5`}},
		{"multiplier on a dynamic axis", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "1", "inputs", 0))["bs_multipliers"] = []any{1, 3, 8, nil}
		}), trt.Manifest, []string{`aitune.graphs["1"].inputs[0].bs_multipliers[2]: axis 2 is a dynamic axis (dim2): its multiplier is unknown, write null`}},
		{"non-primitive other input", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "1", "other_inputs", 0))["value"] = map[string]any{"a": 1}
		}), trt.Manifest, []string{`aitune.graphs["1"].other_inputs[0].value: want null, a boolean, a number or a string`}},
		{"other inputs without strict mode", onTRT(func(b map[string]any) { obj(at(b, "graphs", "1"))["strict"] = false }), trt.Manifest,
			[]string{`aitune.graphs["1"].other_inputs: must be empty when strict is false`}},
		{"other input on a tensor's path", onTRT(func(b map[string]any) {
			obj(at(b, "graphs", "1", "other_inputs", 0))["path"] = []any{[]any{"x", "DICT"}}
		}), trt.Manifest, []string{`aitune.graphs["1"].inputs/other_inputs: aitune.graphs["1"].inputs[0] and other_inputs[0] have the same path x`}},
		{"llm phase without cache_position", onORT(func(b map[string]any) { obj(at(b, "graphs", "0"))["llm_phase"] = "prefill" }), ort.Manifest,
			[]string{`aitune.graphs["0"].llm_phase: an LLM phase needs a forward parameter named cache_position`}},
		{"unknown llm phase", onORT(func(b map[string]any) { obj(at(b, "graphs", "0"))["llm_phase"] = "generate" }), ort.Manifest,
			[]string{`aitune.graphs["0"].llm_phase: is "generate", want null, "prefill" or "decode"`}},
		{"duplicate graph spec names", onTRT(func(b map[string]any) { obj(at(b, "graphs", "1"))["graph_spec_name"] = "0" }), trt.Manifest,
			[]string{`aitune.graphs["1"].graph_spec_name: "0" is also the graph spec name of graph "0"`}},
		{"dynamic dim with min = max", onORT(func(b map[string]any) {
			b["dynamic_shapes"] = []any{map[string]any{"path": "input_ids", "shape": []any{map[string]any{"type": "BatchDim", "name": "b", "min": 4, "max": 4}, 7}}}
		}), ort.Manifest, []string{`aitune.dynamic_shapes[0].shape[0]: min 4 must be below max 4`}},
		{"dynamic shape for no input", onORT(func(b map[string]any) {
			b["dynamic_shapes"] = []any{map[string]any{"path": []any{"options", "other"}, "shape": []any{1}}}
		}), ort.Manifest, []string{`aitune.dynamic_shapes[0].path: ('options', 'other') is not the path of any graph's input`}},
		{"dynamic shape not in bundle.json", onORT(func(b map[string]any) {
			b["dynamic_shapes"] = []any{map[string]any{"path": "input_ids", "shape": []any{map[string]any{"type": "BatchDim", "name": "b", "min": 1, "max": 16}, map[string]any{"type": "DynamicDim", "name": "s", "min": 4, "max": 128}}}}
		}), ort.Manifest, []string{`aitune.dynamic_shapes[0]: input "input_input_ids" of graph "0" has explicit dims here but none in bundle.json's dynamic_shapes`}},
		{"dynamic shape differing from bundle.json", onTRT(func(b map[string]any) {
			bd := map[string]any{"type": "BatchDim", "name": "batch", "min": 1, "max": 64}
			b["dynamic_shapes"] = []any{
				map[string]any{"path": "x", "shape": []any{bd, 3, map[string]any{"type": "DynamicDim", "name": "side", "min": 8, "max": 32}, map[string]any{"type": "DynamicDim", "name": "side", "min": 8, "max": 32}}},
				map[string]any{"path": "mask", "shape": []any{bd, 8}},
			}
		}), trt.Manifest, []string{`aitune.dynamic_shapes[0].shape: differs from bundle.json's dynamic_shapes["input_x"] ((BatchDim("batch", min=1, max=64, opt=8), 3,`}},
		{"same-named dims differ", onORT(func(b map[string]any) {
			b["dynamic_shapes"] = []any{
				map[string]any{"path": "input_ids", "shape": []any{map[string]any{"type": "BatchDim", "name": "b", "min": 1, "max": 16}, 7}},
				map[string]any{"path": []any{"options", "mask"}, "shape": []any{map[string]any{"type": "BatchDim", "name": "b", "min": 1, "max": 8}, 7}},
			}
		}), ort.Manifest, []string{`aitune.dynamic_shapes[1].shape[0]: dim "b" is BatchDim("b", min=1, max=8, opt=None) here but BatchDim("b", min=1, max=16, opt=None) elsewhere`}},
		{"dynamic shape rank", onORT(func(b map[string]any) {
			b["dynamic_shapes"] = []any{map[string]any{"path": "input_ids", "shape": []any{map[string]any{"type": "BatchDim", "name": "b", "min": 1, "max": 16}}}}
		}), ort.Manifest, []string{`aitune.dynamic_shapes[0].shape: has 1 dims, input "input_input_ids" of graph "0" has rank 2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBlock(tt.raw(t), tt.m)
			var be *BlockError
			if !errors.As(err, &be) {
				t.Fatalf("ParseBlock = %v, %v; want a *BlockError", b, err)
			}
			for _, w := range tt.want {
				found := false
				for _, p := range be.Problems {
					found = found || strings.Contains(p, w)
				}
				if !found {
					t.Errorf("no problem contains %q; problems:\n  %s", w, strings.Join(be.Problems, "\n  "))
				}
			}
			for _, p := range be.Problems {
				if !strings.HasPrefix(p, "aitune") {
					t.Errorf("problem %q does not start with its JSON path", p)
				}
			}
		})
	}
}

// TestParseBlockReportsEveryProblem: one submission shows all mistakes of
// a kind. Structural ones (the schema's) come all together; the checks
// against the bundle need the structure right, so they come next time, all
// together too.
func TestParseBlockReportsEveryProblem(t *testing.T) {
	c := aitunetest.TRT2()
	for _, tc := range []struct {
		name string
		f    func(b map[string]any)
		want []string
	}{
		{"structural", func(b map[string]any) {
			b["format"] = "v0"
			obj(at(b, "graphs", "0", "inputs", 0))["bs_multipliers"] = []any{1}
			obj(at(b, "graphs", "1"))["strict"] = "yes"
		}, []string{`aitune.format: is "v0", want "aitune.block/v1"`, `aitune.graphs["1"].strict: want a boolean, got a string`}},
		{"against the bundle", func(b map[string]any) {
			obj(at(b, "graphs", "0", "inputs", 0))["bs_multipliers"] = []any{1}
			obj(at(b, "graphs", "1"))["graph_spec_name"] = "0"
			obj(at(b, "graphs", "1", "inputs", 0))["path"] = []any{[]any{"y", "DICT"}}
		}, []string{`aitune.graphs["0"].inputs[0].bs_multipliers: has 1 entries`, `aitune.graphs["1"].inputs[0].path[0]: "y" is not a parameter`, `aitune.graphs["1"].graph_spec_name: "0" is also`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBlock(mutate(t, c.Block, tc.f), c.Manifest)
			var be *BlockError
			if !errors.As(err, &be) || len(be.Problems) != len(tc.want) {
				t.Fatalf("want %d problems, got %v", len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(be.Problems[i], w) {
					t.Errorf("problem %d is %q, want it to start with %q", i, be.Problems[i], w)
				}
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("aitune block is invalid (%d problems):\n  - ", len(tc.want))) {
				t.Errorf("message: %v", err)
			}
		})
	}
}

// TestSchemaExamples keeps SCHEMA.md honest: its two examples are valid
// blocks for the golden cases' bundles.
func TestSchemaExamples(t *testing.T) {
	doc, err := os.ReadFile("SCHEMA.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(examples) != 2 {
		t.Fatalf("SCHEMA.md has %d JSON examples, want 2", len(examples))
	}
	for i, m := range []bundle.Manifest{aitunetest.TRT2().Manifest, aitunetest.ORT1().Manifest} {
		b, err := ParseBlock(examples[i][1], m)
		if err != nil || b == nil {
			t.Errorf("example %d: %v", i+1, err)
		}
	}
}
