package aitune

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
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

// graphPlan is one graph, checked and ready to write.
type graphPlan struct {
	g         Graph
	bg        *BlockGraph
	profiles  []shapes.Profile
	relocated *relocation // ONNX Runtime with ExternalData: the rewritten model
	files     BackendFiles
}

// plan checks graphs against the block before anything is written.
func plan(block *Block, graphs []Graph) ([]graphPlan, error) {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	var plans []graphPlan
	for i, g := range graphs {
		where := fmt.Sprintf("graph %q", g.Name)
		bg, ok := block.Graph(g.Name)
		switch {
		case !ok:
			add("graphs[%d]: the aitune block does not describe graph %q", i, g.Name)
			continue
		case seen[g.Name]:
			add("%s: given twice", where)
			continue
		}
		seen[g.Name] = true
		if g.Decl.Name != g.Name {
			add("%s: its declaration is named %q", where, g.Decl.Name)
		}
		for _, p := range checkDecl(bg, g.Decl) {
			add("%s: %s", where, p)
		}
		if st, err := os.Stat(g.EngineFile); err != nil {
			add("%s: engine file: %v", where, err)
		} else if !st.Mode().IsRegular() {
			add("%s: engine file %s is not a regular file", where, g.EngineFile)
		}
		p := graphPlan{g: g, bg: bg}
		switch g.Backend {
		case BackendTRT:
			if g.ONNXDataFile != "" || len(g.ExternalData) > 0 || g.ExecutionProvider != "" {
				add("%s: ONNXDataFile, ExternalData and ExecutionProvider are for ONNX Runtime, not TensorRT", where)
			}
			profiles, err := trtProfiles(bg, g)
			if err != nil {
				add("%s: %v", where, err)
			}
			p.profiles = profiles
		case BackendORT:
			if g.Profiles != nil {
				add("%s: optimization profiles are for TensorRT, not ONNX Runtime", where)
			}
			if g.ExecutionProvider != "" && g.ExecutionProvider != "cuda" && g.ExecutionProvider != "tensorrt" {
				add("%s: execution provider %q is not one AITune's ONNXRuntimeBackend has (\"\", \"cuda\", \"tensorrt\")", where, g.ExecutionProvider)
			}
			if g.ONNXDataFile != "" && len(g.ExternalData) > 0 {
				add("%s: give ONNXDataFile or ExternalData, not both", where)
			}
			if len(g.ExternalData) > 0 {
				r, err := relocateExternal(g.EngineFile, g.ExternalData)
				if err != nil {
					add("%s: %v", where, err)
				}
				p.relocated = r
			}
			if g.ONNXDataFile != "" {
				if st, err := os.Stat(g.ONNXDataFile); err != nil {
					add("%s: ONNX data file: %v", where, err)
				} else if !st.Mode().IsRegular() {
					add("%s: ONNX data file %s is not a regular file", where, g.ONNXDataFile)
				}
			}
		default:
			add("%s: backend %q is not %q or %q (the backends AITune can load from a foreign checkpoint)", where, g.Backend, BackendTRT, BackendORT)
		}
		plans = append(plans, p)
	}
	for _, bg := range block.Graphs {
		if !seen[bg.Graph] {
			add("graph %q has no engine: AITune loads a module only with every graph tuned", bg.Graph)
		}
	}
	if len(probs) > 0 {
		if len(probs) == 1 {
			return nil, errors.New("aitune: " + probs[0])
		}
		return nil, fmt.Errorf("aitune: cannot write the checkpoint (%d problems):\n  - %s", len(probs), strings.Join(probs, "\n  - "))
	}
	return plans, nil
}

// checkDecl checks a graph declaration against the block's description of
// it: the same tensors, and ranks that fit the multipliers and explicit
// dims. ParseBlock ran the same checks on bundle.json's declarations;
// Write runs them again on the declarations it is given.
func checkDecl(bg *BlockGraph, decl bundle.Graph) []string {
	var probs []string
	check := func(kind string, ts []TensorLocator, decls []bundle.TensorDecl) {
		for _, d := range decls {
			if !slices.ContainsFunc(ts, func(t TensorLocator) bool { return t.Name == d.Name }) {
				probs = append(probs, fmt.Sprintf("%s %q has no locator in the aitune block", kind, d.Name))
			}
			if _, ok := torchDType[d.DType]; !ok {
				probs = append(probs, fmt.Sprintf("%s %q: dtype %q has no torch equivalent", kind, d.Name, d.DType))
			}
			if err := shapes.ValidateSpec(d.TensorSpec); err != nil {
				probs = append(probs, err.Error())
			}
		}
		for _, t := range ts {
			d, ok := findDecl(decls, t.Name)
			switch {
			case !ok:
				probs = append(probs, fmt.Sprintf("the aitune block has a locator for %s %q, which is not declared", kind, t.Name))
			case t.Multipliers != nil && len(t.Multipliers) != d.Rank():
				probs = append(probs, fmt.Sprintf("%s %q has rank %d, its bs_multipliers %d entries", kind, t.Name, d.Rank(), len(t.Multipliers)))
			}
		}
	}
	check("input", bg.Inputs, decl.Inputs)
	check("output", bg.Outputs, decl.Outputs)
	for _, t := range bg.Inputs {
		d, ok := findDecl(decl.Inputs, t.Name)
		if dims, explicit := bg.dimsFor(t); ok && explicit && len(dims) != d.Rank() {
			probs = append(probs, fmt.Sprintf("input %q has rank %d, its dynamic shape %d dims", t.Name, d.Rank(), len(dims)))
		}
	}
	return probs
}

// trtProfiles returns the profiles to save for a TensorRT graph: the given
// ones, checked, or the single one AITune would derive.
//
// A graph with explicit dynamic shapes has exactly the one profile AITune
// builds from them: TensorRTBackend.get_profiles rejects user profiles
// combined with dynamic shapes, so AITune never saves any other, and a
// call the shapes allow but the saved profiles do not would fail at
// inference ("No TensorRT optimization profile matches").
func trtProfiles(bg *BlockGraph, g Graph) ([]shapes.Profile, error) {
	explicit := shapes.DynamicShapes{}
	for _, t := range bg.Inputs {
		if dims, ok := bg.dimsFor(t); ok {
			explicit[t.Name] = toShapesDims(dims)
		}
	}
	derived, err := shapes.DeriveProfile(bundle.Specs(g.Decl.Inputs), explicit)
	if err != nil {
		return nil, err
	}
	if g.Profiles == nil {
		return []shapes.Profile{derived}, nil
	}
	if len(g.Profiles) == 0 {
		return nil, errors.New("Profiles is empty (nil derives AITune's single profile)")
	}
	for i, p := range g.Profiles {
		if len(p.Inputs) != len(g.Decl.Inputs) {
			return nil, fmt.Errorf("profile %d has %d inputs, the graph %d (TensorRT profiles name every input)", i, len(p.Inputs), len(g.Decl.Inputs))
		}
		for _, ip := range p.Inputs {
			d, ok := findDecl(g.Decl.Inputs, ip.Name)
			if !ok {
				return nil, fmt.Errorf("profile %d names %q, which is not an input", i, ip.Name)
			}
			if len(ip.Min) != d.Rank() || len(ip.Opt) != d.Rank() || len(ip.Max) != d.Rank() {
				return nil, fmt.Errorf("profile %d input %q: min/opt/max must have rank %d", i, ip.Name, d.Rank())
			}
			for a := range ip.Min {
				if ip.Min[a] < 0 || ip.Min[a] > ip.Opt[a] || ip.Opt[a] > ip.Max[a] {
					return nil, fmt.Errorf("profile %d input %q axis %d: want 0 ≤ min ≤ opt ≤ max, got %d, %d, %d", i, ip.Name, a, ip.Min[a], ip.Opt[a], ip.Max[a])
				}
			}
		}
	}
	if len(explicit) > 0 && (len(g.Profiles) != 1 || !sameProfile(g.Profiles[0], derived)) {
		return nil, fmt.Errorf("%s the graph's dynamic shapes: AITune builds exactly one profile from them, %s, and rejects user profiles with dynamic shapes (leave Profiles nil to write it)",
			profilesString(g.Profiles), profileString(derived))
	}
	return g.Profiles, nil
}

// sameProfile compares two profiles input by input, whatever their order.
func sameProfile(a, b shapes.Profile) bool {
	if len(a.Inputs) != len(b.Inputs) {
		return false
	}
	for _, x := range a.Inputs {
		i := slices.IndexFunc(b.Inputs, func(y shapes.InputProfile) bool { return y.Name == x.Name })
		if i < 0 || !slices.Equal(x.Min, b.Inputs[i].Min) || !slices.Equal(x.Opt, b.Inputs[i].Opt) || !slices.Equal(x.Max, b.Inputs[i].Max) {
			return false
		}
	}
	return true
}

func profileString(p shapes.Profile) string {
	parts := make([]string, len(p.Inputs))
	for i, ip := range p.Inputs {
		parts[i] = fmt.Sprintf("%s min %v opt %v max %v", ip.Name, ip.Min, ip.Opt, ip.Max)
	}
	return "{" + strings.Join(parts, "; ") + "}"
}

func profilesString(ps []shapes.Profile) string {
	if len(ps) == 1 {
		return "the given profile " + profileString(ps[0]) + " contradicts"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = profileString(p)
	}
	return fmt.Sprintf("the %d given profiles %s contradict", len(ps), strings.Join(parts, ", "))
}

func toShapesDims(ds []Dim) []shapes.Dim {
	out := make([]shapes.Dim, len(ds))
	for i, d := range ds {
		out[i] = shapes.Dim{Size: d.Size, Name: d.Name, Min: d.Min, Max: d.Max, Batch: d.Batch}
		if d.Opt != nil {
			out[i].Opt = *d.Opt
		}
	}
	return out
}

// profilesJSON writes profiles as TensorRTBackend saves them: json.dump of
// a list with one {input name: [min, opt, max]} object per profile, with
// Python's default separators and no trailing newline.
func profilesJSON(ps []shapes.Profile) []byte {
	var b bytes.Buffer
	ints := func(s []int64) {
		b.WriteByte('[')
		for i, v := range s {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte(']')
	}
	b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		for j, ip := range p.Inputs {
			if j > 0 {
				b.WriteString(", ")
			}
			// Names follow the naming contract: [A-Za-z0-9_] only, no
			// escaping needed.
			b.WriteString(strconv.Quote(ip.Name) + ": [")
			ints(ip.Min)
			b.WriteString(", ")
			ints(ip.Opt)
			b.WriteString(", ")
			ints(ip.Max)
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// fileSum is what is known of a staged file.
type fileSum struct {
	size   int64
	sha256 string
	crc32  uint32
}

func sumOf(b []byte) fileSum {
	s := sha256.Sum256(b)
	return fileSum{size: int64(len(b)), sha256: hex.EncodeToString(s[:]), crc32: crc32.ChecksumIEEE(b)}
}

// stager writes the checkpoint folder, hashing each file once as it goes:
// engines can be gigabytes, and the sums file, the archive's CRCs and the
// manifest all need the same digests.
type stager struct {
	root  string
	files map[string]fileSum // by folder-relative slash path
}

func (w *stager) write(rel string, data []byte) error {
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	w.files[rel] = sumOf(data)
	return nil
}

func (w *stager) copy(rel, src string) error {
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	sha, crc := sha256.New(), crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(out, sha, crc), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("aitune: copying %s: %w", src, err)
	}
	w.files[rel] = fileSum{size: n, sha256: hex.EncodeToString(sha.Sum(nil)), crc32: crc.Sum32()}
	return nil
}

// backend stages backend k's artifacts and returns its backends pair.
func (w *stager) backend(k int, p *graphPlan, block *Block, opts Options) (pickle.Dict, pickle.Dict, error) {
	in, out, err := graphSpecs(p.bg, p.g.Decl)
	if err != nil {
		return nil, nil, fmt.Errorf("aitune: graph %q: %w", p.g.Name, err)
	}
	key, err := in.dict()
	if err != nil {
		return nil, nil, fmt.Errorf("aitune: graph %q: %w", p.g.Name, err)
	}
	spec := graphSpecDict(block, p.bg, in, out)
	dir := strconv.Itoa(k) + "/1/"
	p.files = BackendFiles{Graph: p.g.Name, Index: k}
	var d pickle.Dict
	switch p.g.Backend {
	case BackendTRT:
		engine, profiles := dir+"tensorrt/model.plan", dir+"tensorrt/model_optimization_profiles.json"
		if err := w.copy(engine, p.g.EngineFile); err != nil {
			return nil, nil, err
		}
		if err := w.write(profiles, profilesJSON(p.profiles)); err != nil {
			return nil, nil, err
		}
		p.files.Type, p.files.Artifacts = "TensorRTBackend", []string{engine, profiles}
		// Key order of TensorRTBackend.to_dict().
		d = pickle.D(
			"type", pickle.Str("TensorRTBackend"),
			"engine_path", artifactValue(engine),
			"output_object", skeletonValue(p.bg.Skeleton),
			"graph_spec", spec,
			"device", deviceValue(opts.DeviceIndex),
			"quantization_config", pickle.None{},
			"config", trtConfigValue(opts.UseCUDAGraphs),
			"use_cuda_graphs", pickle.Bool(opts.UseCUDAGraphs),
			"trt_optimization_profiles_path", artifactValue(profiles),
		)
	case BackendORT:
		model := dir + "model_raw.onnx"
		if p.relocated != nil {
			if err := w.write(model, p.relocated.model); err != nil {
				return nil, nil, err
			}
		} else if err := w.copy(model, p.g.EngineFile); err != nil {
			return nil, nil, err
		}
		p.files.Type, p.files.Artifacts = "ONNXRuntimeBackend", []string{model}
		var ep pickle.Value = pickle.None{}
		if p.g.ExecutionProvider != "" {
			ep = pickle.Str(p.g.ExecutionProvider) // from_dict accepts the enum's value
		}
		// Key order of ONNXRuntimeBackend.to_dict().
		d = pickle.D(
			"type", pickle.Str("ONNXRuntimeBackend"),
			"config", pickle.D("use_dynamo", pickle.Bool(true), "execution_provider", ep, "opset_version", pickle.None{}),
			"onnx_model_path", artifactValue(model),
			"output_object", skeletonValue(p.bg.Skeleton),
			"graph_spec", spec,
			"device", deviceValue(opts.DeviceIndex),
		)
		if p.g.ONNXDataFile != "" || p.relocated != nil {
			data := dir + ortDataName
			var err error
			if p.relocated != nil {
				err = w.concat(data, p.g.ExternalData, p.relocated)
			} else {
				err = w.copy(data, p.g.ONNXDataFile)
			}
			if err != nil {
				return nil, nil, err
			}
			p.files.Artifacts = append(p.files.Artifacts, data)
			d = append(d, pickle.Item{Key: pickle.Str("onnx_data_path"), Value: artifactValue(data)})
		}
	}
	return key, d, nil
}

// sortedFiles returns the staged files in the order Python sorts Paths:
// component by component, so "a/x" sorts before "a-b/x" although '-' < '/'.
func (w *stager) sortedFiles() []string {
	rels := make([]string, 0, len(w.files))
	for rel := range w.files {
		rels = append(rels, rel)
	}
	slices.SortFunc(rels, comparePaths)
	return rels
}

func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// sums is ShaSumsSaveTask's file: "<hex>␠␠<posix path>\n" per file of the
// folder, sorted, the sums file itself excluded (it does not exist yet
// when AITune lists the folder).
func (w *stager) sums() []byte {
	var b bytes.Buffer
	for _, rel := range w.sortedFiles() {
		fmt.Fprintf(&b, "%s  %s\n", w.files[rel].sha256, rel)
	}
	return b.Bytes()
}

// archive writes ZipSaveTask's <name>.ait: every file of the folder,
// stored, under its folder-relative name, no directory entries. Entries
// are sorted and timestamps fixed so the archive is byte-for-byte
// reproducible (Python lists the folder in directory order and stamps
// file times; neither matters to the loader).
func (w *stager) archive(dst string) (fileSum, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fileSum{}, fmt.Errorf("aitune: %w", err)
	}
	defer f.Close()
	sha, crc := sha256.New(), crc32.NewIEEE()
	cw := &countWriter{w: io.MultiWriter(f, sha, crc)}
	zw := zip.NewWriter(cw)
	for _, rel := range w.sortedFiles() {
		fs := w.files[rel]
		fh := &zip.FileHeader{
			Name:               rel,
			Method:             zip.Store,
			CreatorVersion:     3<<8 | 20, // made by Unix, as Python's zipfile on Linux
			ReaderVersion:      20,
			ModifiedDate:       1<<5 | 1, // 1980-01-01 00:00
			CRC32:              fs.crc32,
			CompressedSize64:   uint64(fs.size),
			UncompressedSize64: uint64(fs.size),
			ExternalAttrs:      0o100644 << 16, // regular file, rw-r--r--
		}
		if !isASCII(rel) {
			fh.Flags |= 0x800 // UTF-8 name
		}
		zf, err := zw.CreateRaw(fh)
		if err != nil {
			return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
		}
		if err := copyFileTo(zf, filepath.Join(w.root, filepath.FromSlash(rel))); err != nil {
			return fileSum{}, err
		}
	}
	if err := zw.Close(); err != nil {
		return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
	}
	return fileSum{size: cw.n, sha256: hex.EncodeToString(sha.Sum(nil)), crc32: crc.Sum32()}, nil
}

func copyFileTo(w io.Writer, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("aitune: %s: %w", path.Base(src), err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
