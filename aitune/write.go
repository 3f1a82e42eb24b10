package aitune

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tunefleet/tunefleet/aitune/pickle"
	"github.com/tunefleet/tunefleet/aitune/torchzip"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// The engine technologies a checkpoint can hold, named as tunefleet's
// candidates name them.
const (
	BackendTRT = "trt" // AITune TensorRTBackend: a TensorRT plan and its profiles
	BackendORT = "ort" // AITune ONNXRuntimeBackend: an ONNX model run by ONNX Runtime
)

// Graph is one tuned graph to write: its bundle declaration and the engine
// that won it.
type Graph struct {
	// Name is the bundle graph name; the block must describe it.
	Name string
	// Backend is BackendTRT or BackendORT.
	Backend string
	// Decl is the graph's declaration (inputs and outputs with labelled
	// shapes and bounds) as tuned: the TensorSpecs are written from it.
	Decl bundle.Graph
	// EngineFile is the local path of the engine: a TensorRT plan, or for
	// ONNX Runtime the ONNX model (written as model_raw.onnx).
	EngineFile string
	// Profiles are the TensorRT optimization profiles the plan was built
	// with, written as model_optimization_profiles.json (reference §6.4).
	// Nil means the single profile AITune derives: per input min, opt (or
	// max) and max, explicit dynamic dims first (shapes.DeriveProfile).
	Profiles []shapes.Profile
	// ONNXDataFile is the ONNX model's external data file, for ONNX
	// Runtime only; the model must refer to it as "model_raw.onnx.data",
	// the name AITune gives it.
	ONNXDataFile string
	// ExternalData are the ONNX model's external data files as the bundle
	// has them (ONNX Runtime only): Write ships them as AITune's backend
	// expects, one model_raw.onnx.data beside model_raw.onnx that the
	// model names (its locations and offsets are rewritten), recorded as
	// the backend's onnx_data_path. Use it or ONNXDataFile, not both.
	ExternalData []ExternalFile
	// ExecutionProvider is ONNX Runtime's provider in AITune's terms: ""
	// (AITune's default, CUDA), "cuda" or "tensorrt".
	ExecutionProvider string
}

// Options tune what Write lays out.
type Options struct {
	// Compress writes what LocalTorchStorage(compress_checkpoint=True)
	// saves and loads: the folder plus <name>.ait (a stored zip of it) and
	// the SHA-256 sums file inside and beside it. Without it only the
	// folder is written, which compress_checkpoint=False loads.
	Compress bool
	// DeviceIndex is the CUDA device stored with each backend
	// (torch.device("cuda", DeviceIndex)); ait.load's device_map and
	// Module.from_dict's device override it.
	DeviceIndex int
	// UseCUDAGraphs is TensorRTBackendConfig.use_cuda_graphs.
	UseCUDAGraphs bool
}

// Manifest describes a written checkpoint. Paths are slash-separated and
// relative to the directory given to Write.
type Manifest struct {
	Name     string         `json:"name"`              // the checkpoint name: ait.load(module, Name, …)
	Folder   string         `json:"folder"`            // Name
	Archive  string         `json:"archive,omitempty"` // Name + ".ait" when compressed
	Sums     string         `json:"sums,omitempty"`    // the sums file beside the archive when compressed
	Files    []File         `json:"files"`             // every file written, sorted by path
	Backends []BackendFiles `json:"backends"`          // in checkpoint numbering order
}

// File is one written file.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// BackendFiles is one backend of the checkpoint.
type BackendFiles struct {
	Graph     string   `json:"graph"`     // bundle graph name
	Index     int      `json:"index"`     // the backend number, 1-based
	Type      string   `json:"type"`      // "TensorRTBackend" or "ONNXRuntimeBackend"
	Artifacts []string `json:"artifacts"` // ArtifactPath relative paths (relative to the folder)
}

// StateFile is the torch.save file inside the checkpoint folder.
const StateFile = "state_dict.pt"

// Write writes the AITune checkpoint of a module tuned by the fleet into
// dir, laid out as ait.save with LocalTorchStorage(base_folder=dir,
// compress_checkpoint=opts.Compress) would, so that
//
//	ait.load(module, name, storage=LocalTorchStorage(base_folder=dir, compress_checkpoint=...))
//
// loads it:
//
//	dir/name/state_dict.pt                                    torch.save zip of {"": <Module dict>}
//	dir/name/<k>/1/tensorrt/model.plan                        graph k's TensorRT plan
//	dir/name/<k>/1/tensorrt/model_optimization_profiles.json  and its profiles
//	dir/name/<k>/1/model_raw.onnx (+ .data)                   or graph k's ONNX model
//	dir/name/<stem>_sha256_sums.txt                           compressed only
//	dir/name.ait, dir/<stem>_sha256_sums.txt                  compressed only
//
// Backends are numbered 1, 2, … in the order of graphs, which must be the
// bundle's graph order, AITune's graph creation order. For a single
// wrapped module that is also the order AITune's checkpoint traversal
// numbers them: it walks the state with a LIFO stack of dicts, so for a
// pipeline of several modules the last attribute's backends come first,
// but inside one TunedModule dict the "backends" list is enumerated in
// list order (storage_tasks._iter_backend_data_dicts), and list order is
// graph order (TunedModule.to_dict). Each backend has one artifact root
// (its build cache dir), hence the single "1" below <k>.
//
// graphs must describe exactly the block's graphs: AITune routes every
// call by graph, so a module with an untuned graph cannot be loaded.
// Existing files of the same checkpoint are replaced; the new files are
// staged beside them and renamed into place only once complete.
func Write(dir, name string, block *Block, graphs []Graph, opts Options) (Manifest, error) {
	if err := checkName(name); err != nil {
		return Manifest{}, err
	}
	if block == nil {
		return Manifest{}, errors.New("aitune: no aitune block: the bundle carries none, so no checkpoint can be written")
	}
	if opts.DeviceIndex < 0 {
		return Manifest{}, fmt.Errorf("aitune: device index %d is negative", opts.DeviceIndex)
	}
	plans, err := plan(block, graphs)
	if err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("aitune: %w", err)
	}
	stage, err := os.MkdirTemp(dir, "."+name+".staging-")
	if err != nil {
		return Manifest{}, fmt.Errorf("aitune: %w", err)
	}
	defer os.RemoveAll(stage)

	w := &stager{root: filepath.Join(stage, name), files: map[string]fileSum{}}
	man := Manifest{Name: name, Folder: name}
	keys := make([]pickle.Dict, len(plans))
	backends := make([]pickle.Dict, len(plans))
	for i := range plans {
		p := &plans[i]
		keys[i], backends[i], err = w.backend(i+1, p, block, opts)
		if err != nil {
			return Manifest{}, err
		}
		man.Backends = append(man.Backends, p.files)
	}
	pkl, err := pickle.Marshal(stateValue(block, keys, backends))
	if err != nil {
		return Manifest{}, fmt.Errorf("aitune: %w", err)
	}
	var state bytes.Buffer
	if err := torchzip.Write(&state, strings.TrimSuffix(StateFile, ".pt"), pkl); err != nil {
		return Manifest{}, fmt.Errorf("aitune: %w", err)
	}
	if err := w.write(StateFile, state.Bytes()); err != nil {
		return Manifest{}, err
	}

	staged := []string{name} // top-level entries of the stage, in rename order
	sumsName := pyStem(name) + "_sha256_sums.txt"
	outside := map[string]fileSum{}
	if opts.Compress {
		sums := w.sums()
		if err := w.write(sumsName, sums); err != nil {
			return Manifest{}, err
		}
		ait, err := w.archive(filepath.Join(stage, name+".ait"))
		if err != nil {
			return Manifest{}, err
		}
		outside[name+".ait"] = ait
		if err := os.WriteFile(filepath.Join(stage, sumsName), sums, 0o644); err != nil {
			return Manifest{}, fmt.Errorf("aitune: %w", err)
		}
		outside[sumsName] = sumOf(sums)
		staged = append(staged, name+".ait", sumsName)
		man.Archive, man.Sums = name+".ait", sumsName
	}

	// Replace the previous checkpoint of this name, including an archive
	// and sums file an earlier compressed write left (they would otherwise
	// describe other contents than the folder).
	for _, old := range []string{name, name + ".ait", sumsName} {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return Manifest{}, fmt.Errorf("aitune: replacing %s: %w", old, err)
		}
	}
	for _, s := range staged {
		if err := os.Rename(filepath.Join(stage, s), filepath.Join(dir, s)); err != nil {
			return Manifest{}, fmt.Errorf("aitune: %w", err)
		}
	}

	for rel, fs := range w.files {
		man.Files = append(man.Files, File{Path: name + "/" + rel, Size: fs.size, SHA256: fs.sha256})
	}
	for rel, fs := range outside {
		man.Files = append(man.Files, File{Path: rel, Size: fs.size, SHA256: fs.sha256})
	}
	slices.SortFunc(man.Files, func(a, b File) int { return comparePaths(a.Path, b.Path) })
	return man, nil
}

// checkName accepts a checkpoint name that is one path component; AITune
// strips a trailing ".ait" from the name it is given, so such a name would
// not load under itself.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("aitune: invalid checkpoint name %q", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("aitune: checkpoint name %q must be a single path component", name)
	case strings.HasSuffix(name, ".ait"):
		return fmt.Errorf("aitune: checkpoint name %q ends in .ait, which AITune strips when loading; drop the suffix", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("aitune: checkpoint name %q is not valid UTF-8", name)
	}
	return nil
}

// pyStem is pathlib's PurePath(name).stem: AITune names the sums file
// after the folder's stem (get_sha_sums_path), so "my.model" gets
// "my_sha256_sums.txt".
func pyStem(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 && i < len(name)-1 {
		return name[:i]
	}
	return name
}
