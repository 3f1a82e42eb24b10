package aitunetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// Case is one golden checkpoint.
type Case struct {
	Dir        string // directory under testdata/golden
	Checkpoint string // the checkpoint name
	Manifest   bundle.Manifest
	Block      json.RawMessage
	Graphs     []Graph
	Options    aitune.Options
}

// Graph is one graph's engine and backend settings.
type Graph struct {
	Name              string
	Backend           string
	Engine            []byte // fake engine bytes
	ONNXData          []byte // ORT external data, optional
	Profiles          []shapes.Profile
	ExecutionProvider string
}

// Cases returns the golden cases.
func Cases() []Case { return []Case{TRT2(), ORT1()} }

func decl(name string, dt bundle.DType, shape []shapes.Axis, lo, hi []int64) bundle.TensorDecl {
	return bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: name, Shape: shape, Min: lo, Max: hi}, DType: dt}
}

var (
	b0 = shapes.BatchAxis(0)
	s  = shapes.Static
	d  = shapes.DynAxis
)

// TRT2 is a module with two graphs built as TensorRT plans:
//
//	def forward(self, x, mask=None, *, return_dict=False) -> {"logits": t, "hidden": (t, 3)}
//
// graph "0" was recorded as m(x, mask) and graph "1" as m(x,
// return_dict=True) with a varying image size. The module had explicit
// dynamic shapes (a shared BatchDim), which the block leaves to
// bundle.json. The checkpoint name has a dot, so the sums file is named
// after its stem, as AITune names it. Compressed: folder, .ait and sums.
func TRT2() Case {
	m := bundle.Manifest{
		Format: bundle.FormatV1,
		Model:  "demo.TwoHeads",
		DynamicShapes: shapes.DynamicShapes{
			"input_x":    {{Name: "batch", Min: 1, Opt: 8, Max: 64, Batch: true}, {Size: 3}, {Name: "side", Min: 8, Max: 32}, {Name: "side", Min: 8, Max: 32}},
			"input_mask": {{Name: "batch", Min: 1, Opt: 8, Max: 64, Batch: true}, {Size: 8}},
		},
		Graphs: []bundle.Graph{
			{
				Name: "0", ONNX: "graphs/0/model.onnx", Samples: []string{"graphs/0/sample_0"},
				Inputs: []bundle.TensorDecl{
					decl("input_x", bundle.Float32, []shapes.Axis{b0, s(3), s(8), s(8)}, []int64{1, 3, 8, 8}, []int64{64, 3, 8, 8}),
					decl("input_mask", bundle.Int64, []shapes.Axis{b0, s(8)}, []int64{1, 8}, []int64{64, 8}),
				},
				Outputs: []bundle.TensorDecl{
					decl("output_logits", bundle.Float32, []shapes.Axis{b0, s(10)}, []int64{1, 10}, []int64{2, 10}),
					decl("output_hidden_0", bundle.Float16, []shapes.Axis{b0, s(4), s(16)}, []int64{1, 4, 16}, []int64{2, 4, 16}),
				},
			},
			{
				Name: "1", ONNX: "graphs/1/model.onnx", Samples: []string{"graphs/1/sample_0"},
				Inputs: []bundle.TensorDecl{
					decl("input_x", bundle.Float32, []shapes.Axis{b0, s(3), d(2), d(3)}, []int64{1, 3, 8, 8}, []int64{64, 3, 32, 32}),
				},
				Outputs: []bundle.TensorDecl{
					decl("output_logits", bundle.Float32, []shapes.Axis{b0, s(10)}, []int64{1, 10}, []int64{2, 10}),
					decl("output_hidden_0", bundle.Float16, []shapes.Axis{b0, s(4), s(16)}, []int64{1, 4, 16}, []int64{2, 4, 16}),
				},
			},
		},
	}
	block := `{
  "format": "aitune.block/v1",
  "name": "demo.TwoHeads",
  "forward_signature": {"parameters": [
    {"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false},
    {"name": "mask", "kind": "POSITIONAL_OR_KEYWORD", "has_default": true},
    {"name": "return_dict", "kind": "KEYWORD_ONLY", "has_default": true}
  ]},
  "graphs": {
    "0": {
      "inputs": [
        {"name": "input_x", "path": [["x", "DICT"]], "bs_multipliers": [1, 3, 8, 8]},
        {"name": "input_mask", "path": [["mask", "DICT"]]}
      ],
      "outputs": [
        {"name": "output_logits", "path": [["logits", "DICT"]]},
        {"name": "output_hidden_0", "path": [["hidden", "DICT"], [0, "SEQUENCE"]]}
      ],
      "output_skeleton": {"dict": {"logits": null, "hidden": {"tuple": [null, 3]}}}
    },
    "1": {
      "inputs": [
        {"name": "input_x", "path": [["x", "DICT"]]}
      ],
      "other_inputs": [
        {"path": [["return_dict", "DICT"]], "value": true}
      ],
      "outputs": [
        {"name": "output_logits", "path": [["logits", "DICT"]]},
        {"name": "output_hidden_0", "path": [["hidden", "DICT"], [0, "SEQUENCE"]]}
      ],
      "output_skeleton": {"dict": {"logits": null, "hidden": {"tuple": [null, 3]}}}
    }
  }
}`
	return Case{
		Dir: "trt2", Checkpoint: "two_heads.v1", Manifest: m, Block: json.RawMessage(block),
		Options: aitune.Options{Compress: true},
		Graphs: []Graph{
			{
				Name: "0", Backend: aitune.BackendTRT, Engine: []byte("fake TensorRT plan of graph 0\n"),
				// The profile given explicitly, as finalize passes the one the
				// engine was built with: with dynamic shapes it is the single
				// profile AITune derives from them (explicit dims over the
				// recorded 8×8), the only one AITune ever saves for such a
				// graph (it rejects user profiles with dynamic shapes).
				Profiles: []shapes.Profile{
					{Inputs: []shapes.InputProfile{
						{Name: "input_x", Min: []int64{1, 3, 8, 8}, Opt: []int64{8, 3, 32, 32}, Max: []int64{64, 3, 32, 32}},
						{Name: "input_mask", Min: []int64{1, 8}, Opt: []int64{8, 8}, Max: []int64{64, 8}},
					}},
				},
			},
			// Profiles derived: the explicit dims decide.
			{Name: "1", Backend: aitune.BackendTRT, Engine: []byte("fake TensorRT plan of graph 1\n")},
		},
	}
}

// ORT1 is a module with one graph run by ONNX Runtime (TensorRT execution
// provider) whose model has external data:
//
//	def forward(self, input_ids, options) -> t   # options = {"mask": t}
//
// Not compressed: only the folder.
func ORT1() Case {
	m := bundle.Manifest{
		Format: bundle.FormatV1,
		Model:  "demo.Encoder",
		Graphs: []bundle.Graph{{
			Name: "0", ONNX: "graphs/0/model.onnx", Samples: []string{"graphs/0/sample_0"},
			Inputs: []bundle.TensorDecl{
				decl("input_input_ids", bundle.Int64, []shapes.Axis{b0, d(1)}, []int64{1, 4}, []int64{16, 128}),
				decl("input_options_mask", bundle.Bool, []shapes.Axis{b0, d(1)}, []int64{1, 4}, []int64{16, 128}),
			},
			Outputs: []bundle.TensorDecl{
				decl("output", bundle.Float16, []shapes.Axis{b0, d(1), s(16)}, []int64{1, 4, 16}, []int64{2, 7, 16}),
			},
		}},
	}
	block := `{
  "format": "aitune.block/v1",
  "forward_signature": {"parameters": [
    {"name": "input_ids", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false},
    {"name": "options", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}
  ]},
  "graphs": {
    "0": {
      "inputs": [
        {"name": "input_input_ids", "path": [["input_ids", "DICT"]]},
        {"name": "input_options_mask", "path": [["options", "DICT"], ["mask", "DICT"]]}
      ],
      "outputs": [{"name": "output", "path": []}]
    }
  }
}`
	return Case{
		Dir: "ort1", Checkpoint: "encoder", Manifest: m, Block: json.RawMessage(block),
		Options: aitune.Options{DeviceIndex: 1},
		Graphs: []Graph{{
			Name: "0", Backend: aitune.BackendORT, ExecutionProvider: "tensorrt",
			Engine:   []byte("fake ONNX model of graph 0\n"),
			ONNXData: []byte("fake external data\n"),
		}},
	}
}

// Write parses the case's block and writes its checkpoint into dir, with
// the fake engines staged in a scratch directory first.
func (c Case) Write(dir string) (aitune.Manifest, error) {
	block, err := aitune.ParseBlock(c.Block, c.Manifest)
	if err != nil {
		return aitune.Manifest{}, err
	}
	scratch, err := os.MkdirTemp("", "aitunetest-")
	if err != nil {
		return aitune.Manifest{}, err
	}
	defer os.RemoveAll(scratch)
	var graphs []aitune.Graph
	for _, g := range c.Graphs {
		decl, ok := c.Manifest.Graph(g.Name)
		if !ok {
			return aitune.Manifest{}, fmt.Errorf("case %s: no graph %q", c.Dir, g.Name)
		}
		engine := filepath.Join(scratch, "engine-"+g.Name)
		if err := os.WriteFile(engine, g.Engine, 0o644); err != nil {
			return aitune.Manifest{}, err
		}
		ag := aitune.Graph{Name: g.Name, Backend: g.Backend, Decl: decl, EngineFile: engine, Profiles: g.Profiles, ExecutionProvider: g.ExecutionProvider}
		if g.ONNXData != nil {
			ag.ONNXDataFile = filepath.Join(scratch, "data-"+g.Name)
			if err := os.WriteFile(ag.ONNXDataFile, g.ONNXData, 0o644); err != nil {
				return aitune.Manifest{}, err
			}
		}
		graphs = append(graphs, ag)
	}
	return aitune.Write(dir, c.Checkpoint, block, graphs, c.Options)
}
