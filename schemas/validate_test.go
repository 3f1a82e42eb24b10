package schemas_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/aitune/aitunetest"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func latest() state.Latest {
	return state.Latest{Format: state.LatestFormat, Model: "m", Platform: "cpu", Run: "m-1", StateKey: "blobs/sha256/" + hex64, StateSHA256: hex64, SubmittedAt: time.Unix(0, 0).UTC()}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit decodes doc, applies f and encodes it again.
func edit(t *testing.T, doc []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	return marshal(t, m)
}

// The documents the code and the docs hold validate: the golden cases'
// bundles and blocks, SCHEMA.md's examples, a latest.json.
func TestKnownDocumentsValidate(t *testing.T) {
	for _, c := range aitunetest.Cases() {
		m := c.Manifest
		m.AITune = c.Block
		raw, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.ValidateJSON(schemas.Bundle, "", raw); err != nil {
			t.Errorf("%s: bundle.json: %v", c.Dir, err)
		}
		if _, err := schemas.ValidateJSON(schemas.AITuneBlock, "aitune", c.Block); err != nil {
			t.Errorf("%s: block: %v", c.Dir, err)
		}
	}
	doc, err := os.ReadFile("../aitune/SCHEMA.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, ex := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1) {
		if _, err := schemas.ValidateJSON(schemas.AITuneBlock, "aitune", ex[1]); err != nil {
			t.Errorf("SCHEMA.md example %d: %v", i+1, err)
		}
	}
	if _, err := schemas.ValidateJSON(schemas.Latest, "", marshal(t, latest())); err != nil {
		t.Errorf("latest.json: %v", err)
	}
	for _, r := range []*state.Requires{
		state.NCHWcRequires([]string{state.NCHWcDomain}, "amd64", 16),
		state.NCHWcRequires([]string{state.NCHWcDomain}, "amd64", 8),
		{ComputeCapability: "9.0", TensorRT: "10.3.0"},
	} {
		if _, err := schemas.ValidateJSON(schemas.State, "", stateWith(t, marshal(t, r))); err != nil {
			t.Errorf("state.json with requires %+v: %v", r, err)
		}
	}
}

// stateWith is a state.json of one graph whose requires is the JSON given.
func stateWith(t *testing.T, requires []byte) []byte {
	t.Helper()
	return []byte(`{"format": "tunefleet.state/v1", "model": "m", "platform": "cpu", "target": "cpu", "run": "r", "status": "done",
		"graphs": [{"name": "0", "inputs": [], "outputs": [], "profile": {"inputs": []}, "result_key": "runs/r/graphs/0/result.json", "requires": ` + string(requires) + `}],
		"provenance": {"tunefleet": "x", "go": "go1", "bundle_digest": "sha256:` + hex64 + `", "target": "cpu", "strategy": "first-wins", "candidates": [], "submitted_by": "me", "submitted_at": "2026-01-01T00:00:00Z", "finalized_at": "2026-01-01T00:00:00Z"}}`)
}

func TestBadDocumentsAreRefused(t *testing.T) {
	good := aitunetest.TRT2()
	m := good.Manifest
	bundleJSON, _ := m.Marshal()
	tests := []struct {
		name string
		doc  schemas.Doc
		root string
		raw  []byte
		want []string // the problems, in order
	}{
		{"not JSON", schemas.Bundle, "", []byte(`{"format": `), []string{"format: invalid JSON: unexpected end of input"}},
		{"duplicate key", schemas.Latest, "", []byte(`{"format": "a", "format": "b"}`), []string{`key "format" appears twice`}},
		{"bundle: several mistakes at once", schemas.Bundle, "", edit(t, bundleJSON, func(m map[string]any) {
			m["format"] = "tunefleet.bundle/v0"
			g := m["graphs"].([]any)[1].(map[string]any)
			g["inputs"].([]any)[0].(map[string]any)["dtype"] = "float"
			g["sample"] = []any{}
			delete(m, "model")
		}), []string{
			`format: is "tunefleet.bundle/v0", want "tunefleet.bundle/v1"`,
			`graphs[1].inputs[0].dtype: is "float", want "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64" or "bool"`,
			`graphs[1].sample: unknown field (want one of name, onnx, inputs, outputs, samples, tolerances, external_data)`,
			`model is missing`,
		}},
		{"bundle: a mistake inside the aitune block", schemas.Bundle, "", edit(t, bundleJSON, func(m map[string]any) {
			var b map[string]any
			_ = json.Unmarshal(good.Block, &b)
			b["graphs"].(map[string]any)["0"].(map[string]any)["strict"] = "yes"
			m["aitune"] = b
		}), []string{`aitune.graphs["0"].strict: want a boolean, got a string`}},
		{"bundle: an aitune block that is not an object", schemas.Bundle, "", edit(t, bundleJSON, func(m map[string]any) { m["aitune"] = []any{1} }),
			[]string{`aitune: want null or the AITune recorder's aitune block, an object (aitune-block.schema.json), got [1]`}},
		{"block: a skeleton mistake deep down", schemas.AITuneBlock, "aitune", edit(t, good.Block, func(b map[string]any) {
			g := b["graphs"].(map[string]any)["0"].(map[string]any)
			g["output_skeleton"] = map[string]any{"dict": map[string]any{"logits": nil, "hidden": map[string]any{"tuple": []any{nil, []any{1}}}}}
		}), []string{`aitune.graphs["0"].output_skeleton.dict.hidden.tuple[1]: want null, a boolean, a number, a string or an object, got an array`}},
		{"block: a bad dim", schemas.AITuneBlock, "aitune", edit(t, good.Block, func(b map[string]any) {
			b["dynamic_shapes"] = []any{map[string]any{"path": "x", "shape": []any{-1, map[string]any{"type": "Dim", "name": "", "min": 0, "max": 4}}}}
		}), []string{
			`aitune.dynamic_shapes[0].shape[0]: is -1, want ≥ 0`,
			`aitune.dynamic_shapes[0].shape[1].min: is 0, want ≥ 1`,
			`aitune.dynamic_shapes[0].shape[1].name: is empty`,
			`aitune.dynamic_shapes[0].shape[1].type: is "Dim", want "DynamicDim" or "BatchDim"`,
		}},
		{"latest: wrong types and a missing field", schemas.Latest, "", edit(t, marshal(t, latest()), func(m map[string]any) {
			m["state_sha256"] = "xyz"
			m["run"] = 7
			delete(m, "platform")
		}), []string{
			`platform is missing`,
			`run: want a string, got a number`,
			`state_sha256: is "xyz"; want 64 lowercase hex digits`,
		}},
		{"state: unknown status", schemas.State, "", []byte(`{"format": "tunefleet.state/v1", "model": "m", "platform": "cpu", "target": "cpu", "run": "r", "status": "ok", "graphs": [],
			"provenance": {"tunefleet": "x", "go": "go1", "bundle_digest": "sha256:` + hex64 + `", "target": "cpu", "strategy": "first-wins", "candidates": [], "submitted_by": "me", "submitted_at": "2026-01-01T00:00:00Z", "finalized_at": "2026-01-01T00:00:00Z"}}`),
			[]string{`status: is "ok", want "done", "failed" or "cancelled"`}},
		{"state: a requirement of no known kind", schemas.State, "", stateWith(t, []byte(`{"nchwc_block": 12, "tensorrt": "10.3", "gpu": "h100"}`)),
			[]string{`graphs[0].requires.gpu: unknown field`, `graphs[0].requires.nchwc_block: is 12, want 8 or 16`, `graphs[0].requires.tensorrt: is "10.3"`}},
		{"result: a benchmark without its statistics", schemas.Result, "", []byte(`{"format": "tunefleet.result/v1", "model": "m", "graph": "0", "bundle_digest": "sha256:` + hex64 + `", "inputs": [], "strategy": "first-wins",
			"candidates": ["ort:cpu:basic"], "profile": {"inputs": []}, "batch_sizes": [1], "stop_rule": {"warmup": 1, "window": 1, "max_cv": 0.1, "min_samples": 1, "max_samples": 2, "max_time_ns": 5},
			"results": [{"candidate": "ort:cpu:basic", "status": "passed", "benchmarks": [{"batch_size": 1}]}], "started_at": "2026-01-01T00:00:00Z", "duration_ns": 1}`),
			[]string{`results[0].benchmarks[0]: samples is missing`}},
		{"result: an unknown field of the winner", schemas.Result, "", []byte(`{"format": "tunefleet.result/v1", "model": "m", "graph": "0", "bundle_digest": "sha256:` + hex64 + `", "inputs": [], "strategy": "first-wins",
			"candidates": ["ort:cpu:basic"], "profile": {"inputs": []}, "batch_sizes": [1], "stop_rule": {"warmup": 1, "window": 1, "max_cv": 0.1, "min_samples": 1, "max_samples": 2, "max_time_ns": 5},
			"results": [], "winner": {"index": 0, "candidate": "ort:cpu:basic", "reason": "first", "engin": {}}, "started_at": "2026-01-01T00:00:00Z", "duration_ns": 1}`),
			[]string{`winner.engin: unknown field`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schemas.ValidateJSON(tc.doc, tc.root, tc.raw)
			probs := schemas.Problems(err)
			if err == nil || probs == nil {
				t.Fatalf("err = %v, want problems", err)
			}
			if len(probs) < len(tc.want) {
				t.Fatalf("problems:\n  %s\nwant at least %d", strings.Join(probs, "\n  "), len(tc.want))
			}
			for _, w := range tc.want {
				found := false
				for _, p := range probs {
					found = found || strings.HasPrefix(p, w)
				}
				if !found {
					t.Errorf("no problem starts with %q; problems:\n  %s", w, strings.Join(probs, "\n  "))
				}
			}
		})
	}
}
