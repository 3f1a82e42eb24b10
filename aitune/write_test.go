package aitune_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/aitune/aitunetest"
	"github.com/tunefleet/tunefleet/aitune/torchzip"
	"github.com/tunefleet/tunefleet/shapes"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tree returns every file under dir by slash path.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func keys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestGolden writes every golden case and compares it byte for byte with
// testdata/golden: the checkpoint format (pickle, zip, layout, sums,
// archive) cannot change unnoticed.
func TestGolden(t *testing.T) {
	for _, c := range aitunetest.Cases() {
		t.Run(c.Dir, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := c.Write(dir); err != nil {
				t.Fatal(err)
			}
			got, want := tree(t, dir), tree(t, filepath.Join("testdata", "golden", c.Dir))
			if g, w := keys(got), keys(want); !slices.Equal(g, w) {
				t.Fatalf("files differ from the golden ones (regenerate with `go run ./internal/testkit/tools/mkgolden` if the change is intended)\n got %v\nwant %v", g, w)
			}
			for name, w := range want {
				if !bytes.Equal(got[name], w) {
					t.Errorf("%s differs from the golden file (regenerate with `go run ./internal/testkit/tools/mkgolden` if the change is intended)", name)
				}
			}
		})
	}
}

func TestWriteDeterministic(t *testing.T) {
	c := aitunetest.TRT2()
	a, b := t.TempDir(), t.TempDir()
	if _, err := c.Write(a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	ta, tb := tree(t, a), tree(t, b)
	for name := range ta {
		if !bytes.Equal(ta[name], tb[name]) {
			t.Errorf("%s differs between two writes", name)
		}
	}
}

// TestLoadLikeAITune replays LocalTorchStorage's load tasks in Python on
// what Write produced: unzip, SHA check, torch-style load, relocation of
// every ArtifactPath onto an existing file below its backend's folder.
func TestLoadLikeAITune(t *testing.T) {
	type backend struct {
		Index     int    `json:"index"`
		Type      string `json:"type"`
		Artifacts []struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
		} `json:"artifacts"`
		Profiles []map[string][3][]int64 `json:"profiles"`
	}
	type result struct {
		Archive         []string  `json:"archive"`
		SumsFile        string    `json:"sums_file"`
		Verified        []string  `json:"verified"`
		SumsBesideEqual bool      `json:"sums_beside_equal"`
		Backends        []backend `json:"backends"`
		Files           []string  `json:"files"`
	}
	for _, c := range aitunetest.Cases() {
		t.Run(c.Dir, func(t *testing.T) {
			dir := t.TempDir()
			man, err := c.Write(dir)
			if err != nil {
				t.Fatal(err)
			}
			compress := "0"
			if c.Options.Compress {
				compress = "1"
			}
			var r result
			out := runPython(t, nil, "testdata/aitune_probe.py", "load", dir, c.Checkpoint, compress)
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(r.Backends) != len(c.Graphs) {
				t.Fatalf("AITune's traversal finds %d backends, want %d", len(r.Backends), len(c.Graphs))
			}
			for i, b := range r.Backends {
				g := c.Graphs[i]
				mb := man.Backends[i]
				if b.Index != i+1 || mb.Index != i+1 || mb.Graph != g.Name || b.Type != mb.Type {
					t.Errorf("backend %d: python %+v, manifest %+v", i, b, mb)
				}
				var paths []string
				for _, a := range b.Artifacts {
					paths = append(paths, a.Path)
				}
				if !slices.Equal(paths, mb.Artifacts) {
					t.Errorf("backend %d artifacts: python %v, manifest %v", i+1, paths, mb.Artifacts)
				}
				// The first artifact is the engine: the bytes given.
				if len(b.Artifacts) == 0 || b.Artifacts[0].SHA256 != sha(g.Engine) {
					t.Errorf("backend %d: engine not found intact", i+1)
				}
				if g.Backend == BackendORT && g.ONNXData != nil && (len(b.Artifacts) != 2 || b.Artifacts[1].SHA256 != sha(g.ONNXData)) {
					t.Errorf("backend %d: external data not found intact", i+1)
				}
			}
			if c.Options.Compress {
				if !r.SumsBesideEqual || r.SumsFile != strings.SplitN(c.Checkpoint, ".", 2)[0]+"_sha256_sums.txt" {
					t.Errorf("sums file %q, copy beside equal: %v", r.SumsFile, r.SumsBesideEqual)
				}
				if !slices.Contains(r.Archive, r.SumsFile) || len(r.Verified) != len(r.Files)-1 {
					t.Errorf("archive %v, verified %v of files %v", r.Archive, r.Verified, r.Files)
				}
			}
		})
	}
}

func TestProfilesFile(t *testing.T) {
	c := aitunetest.TRT2()
	dir := t.TempDir()
	if _, err := c.Write(dir); err != nil {
		t.Fatal(err)
	}
	read := func(k int) string {
		b, err := os.ReadFile(filepath.Join(dir, c.Checkpoint, fmt.Sprint(k), "1", "tensorrt", "model_optimization_profiles.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Both graphs have explicit dynamic shapes, so each has the single
	// profile AITune derives from them (BatchDim opt 8; "side" without opt
	// → max), whatever the recorded bounds (graph 0 was recorded 8×8 only),
	// as AITune's get_profiles does; json.dump's form.
	want1 := `[{"input_x": [[1, 3, 8, 8], [8, 3, 32, 32], [64, 3, 32, 32]], "input_mask": [[1, 8], [8, 8], [64, 8]]}]`
	if got := read(1); got != want1 {
		t.Errorf("graph 0 profiles:\n got %s\nwant %s", got, want1)
	}
	want2 := `[{"input_x": [[1, 3, 8, 8], [8, 3, 32, 32], [64, 3, 32, 32]]}]`
	if got := read(2); got != want2 {
		t.Errorf("graph 1 profiles:\n got %s\nwant %s", got, want2)
	}
}

// TestStateZip checks state_dict.pt against the reader rules of §3.7.
func TestStateZip(t *testing.T) {
	for _, c := range aitunetest.Cases() {
		t.Run(c.Dir, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := c.Write(dir); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, c.Checkpoint, StateFile))
			if err != nil {
				t.Fatal(err)
			}
			a, err := torchzip.Read(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if a.Name != "state_dict" || a.Version != 3 || string(a.Records["byteorder"]) != "little" {
				t.Errorf("archive %q version %d byteorder %q", a.Name, a.Version, a.Records["byteorder"])
			}
			if p := a.Pickle(); len(p) < 3 || p[0] != 0x80 || p[1] != 2 || p[len(p)-1] != '.' {
				t.Errorf("data.pkl is not a protocol-2 pickle")
			}
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range zr.File {
				off, _ := f.DataOffset()
				if f.Method != zip.Store || strings.HasSuffix(f.Name, "/") || off%torchzip.Alignment != 0 {
					t.Errorf("%s: method %d, data at %d", f.Name, f.Method, off)
				}
			}
		})
	}
}

var sumsLine = regexp.MustCompile(`^([0-9a-f]{64})  ([^ ].*)$`)

// TestArchiveAndSums checks <name>.ait and the sums file as ZipSaveTask
// and ShaSumsSaveTask write them.
func TestArchiveAndSums(t *testing.T) {
	c := aitunetest.TRT2()
	dir := t.TempDir()
	man, err := c.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	folder := tree(t, filepath.Join(dir, c.Checkpoint))
	sumsName := "two_heads_sha256_sums.txt" // the stem of "two_heads.v1"
	sums, ok := folder[sumsName]
	if !ok {
		t.Fatalf("no %s in the folder: %v", sumsName, keys(folder))
	}
	beside, err := os.ReadFile(filepath.Join(dir, sumsName))
	if err != nil || !bytes.Equal(beside, sums) {
		t.Errorf("the sums file beside the archive differs or is missing (%v)", err)
	}
	// One line per other file, sorted, hashes right.
	var listed []string
	for _, line := range strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n") {
		m := sumsLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("sums line %q is not \"<sha256>  <path>\"", line)
		}
		if got := sha(folder[m[2]]); got != m[1] {
			t.Errorf("%s: listed %s, is %s", m[2], m[1], got)
		}
		listed = append(listed, m[2])
	}
	want := slices.DeleteFunc(keys(folder), func(k string) bool { return k == sumsName })
	if !slices.Equal(listed, want) {
		t.Errorf("sums list %v, want %v", listed, want)
	}
	ait, err := zip.OpenReader(filepath.Join(dir, c.Checkpoint+".ait"))
	if err != nil {
		t.Fatal(err)
	}
	defer ait.Close()
	var names []string
	for _, f := range ait.File {
		names = append(names, f.Name)
		if f.Method != zip.Store || f.FileInfo().IsDir() {
			t.Errorf("%s: method %d dir %v", f.Name, f.Method, f.FileInfo().IsDir())
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(rc) // checks the CRC
		rc.Close()
		if err != nil || !bytes.Equal(buf.Bytes(), folder[f.Name]) {
			t.Errorf("%s in the archive differs from the folder (%v)", f.Name, err)
		}
	}
	if !slices.Equal(names, keys(folder)) {
		t.Errorf("archive entries %v, folder %v", names, keys(folder))
	}
	// The manifest lists exactly what is on disk.
	all := tree(t, dir)
	if len(man.Files) != len(all) {
		t.Errorf("manifest lists %d files, %d on disk", len(man.Files), len(all))
	}
	for _, f := range man.Files {
		if b, ok := all[f.Path]; !ok || int64(len(b)) != f.Size || sha(b) != f.SHA256 {
			t.Errorf("manifest entry %+v does not match the disk", f)
		}
	}
	if man.Archive != "two_heads.v1.ait" || man.Sums != sumsName || man.Folder != "two_heads.v1" {
		t.Errorf("manifest: %+v", man)
	}
}

// TestWriteReplaces writes a compressed checkpoint, then an uncompressed
// one of the same name: the stale archive and sums go, nothing is left of
// the staging directory.
func TestWriteReplaces(t *testing.T) {
	c := aitunetest.TRT2()
	dir := t.TempDir()
	if _, err := c.Write(dir); err != nil {
		t.Fatal(err)
	}
	c.Options.Compress = false
	man, err := c.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"two_heads.v1"}) {
		t.Errorf("dir holds %v, want only the folder", names)
	}
	if man.Archive != "" || man.Sums != "" {
		t.Errorf("manifest: %+v", man)
	}
	if _, err := os.Stat(filepath.Join(dir, "two_heads.v1", "two_heads_sha256_sums.txt")); !os.IsNotExist(err) {
		t.Errorf("uncompressed checkpoint has a sums file (AITune writes none): %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	c := aitunetest.TRT2()
	block, err := ParseBlock(c.Block, c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	engine := filepath.Join(scratch, "plan")
	if err := os.WriteFile(engine, []byte("plan"), 0o644); err != nil {
		t.Fatal(err)
	}
	graph := func(name string) Graph {
		d, _ := c.Manifest.Graph(name)
		return Graph{Name: name, Backend: BackendTRT, Decl: d, EngineFile: engine}
	}
	good := func() []Graph { return []Graph{graph("0"), graph("1")} }
	tests := []struct {
		name   string
		ckpt   string
		block  *Block
		graphs func() []Graph
		opts   Options
		want   string
	}{
		{"name ends in .ait", "m.ait", block, good, Options{}, "drop the suffix"},
		{"name with a slash", "a/b", block, good, Options{}, "single path component"},
		{"dot name", "..", block, good, Options{}, "invalid checkpoint name"},
		{"no block", "m", nil, good, Options{}, "no aitune block"},
		{"negative device", "m", block, good, Options{DeviceIndex: -1}, "device index -1"},
		{"graph missing", "m", block, func() []Graph { return good()[:1] }, Options{}, `graph "1" has no engine`},
		{"graph twice", "m", block, func() []Graph { return append(good(), graph("0")) }, Options{}, `graph "0": given twice`},
		{"graph unknown to the block", "m", block, func() []Graph { g := good(); g[1].Name = "9"; return g }, Options{}, `does not describe graph "9"`},
		{"unknown backend", "m", block, func() []Graph { g := good(); g[0].Backend = "tvm"; return g }, Options{}, `backend "tvm" is not "trt" or "ort"`},
		{"engine missing", "m", block, func() []Graph { g := good(); g[0].EngineFile = filepath.Join(scratch, "nope"); return g }, Options{}, "engine file:"},
		{"engine is a directory", "m", block, func() []Graph { g := good(); g[0].EngineFile = scratch; return g }, Options{}, "is not a regular file"},
		{"declaration lacks a tensor", "m", block, func() []Graph {
			g := good()
			g[0].Decl.Inputs = g[0].Decl.Inputs[:1]
			return g
		}, Options{}, `the aitune block has a locator for input "input_mask", which is not declared`},
		{"profile names an unknown input", "m", block, func() []Graph {
			g := good()
			g[1].Profiles = []shapes.Profile{{Inputs: []shapes.InputProfile{{Name: "input_y", Min: []int64{1, 3, 8, 8}, Opt: []int64{1, 3, 8, 8}, Max: []int64{1, 3, 8, 8}}}}}
			return g
		}, Options{}, `profile 0 names "input_y"`},
		{"profile min above opt", "m", block, func() []Graph {
			g := good()
			g[1].Profiles = []shapes.Profile{{Inputs: []shapes.InputProfile{{Name: "input_x", Min: []int64{2, 3, 8, 8}, Opt: []int64{1, 3, 8, 8}, Max: []int64{4, 3, 8, 8}}}}}
			return g
		}, Options{}, "want 0 ≤ min ≤ opt ≤ max"},
		{"empty profile list", "m", block, func() []Graph { g := good(); g[1].Profiles = []shapes.Profile{}; return g }, Options{}, "Profiles is empty"},
		// AITune never saves profiles other than the one it derives from a
		// graph's dynamic shapes: graph 0's x is 8..32 wide, a profile
		// stopping at 8 would refuse a 16×16 call at inference.
		{"profiles contradicting the dynamic shapes", "m", block, func() []Graph {
			g := good()
			g[0].Profiles = []shapes.Profile{
				{Inputs: []shapes.InputProfile{
					{Name: "input_x", Min: []int64{1, 3, 8, 8}, Opt: []int64{8, 3, 8, 8}, Max: []int64{8, 3, 8, 8}},
					{Name: "input_mask", Min: []int64{1, 8}, Opt: []int64{8, 8}, Max: []int64{8, 8}},
				}},
				{Inputs: []shapes.InputProfile{
					{Name: "input_x", Min: []int64{9, 3, 8, 8}, Opt: []int64{32, 3, 8, 8}, Max: []int64{64, 3, 8, 8}},
					{Name: "input_mask", Min: []int64{9, 8}, Opt: []int64{32, 8}, Max: []int64{64, 8}},
				}},
			}
			return g
		}, Options{}, `graph "0": the 2 given profiles {input_x min [1 3 8 8] opt [8 3 8 8] max [8 3 8 8]; input_mask min [1 8] opt [8 8] max [8 8]}, {input_x min [9 3 8 8] opt [32 3 8 8] max [64 3 8 8]; input_mask min [9 8] opt [32 8] max [64 8]} contradict the graph's dynamic shapes: AITune builds exactly one profile from them, {input_x min [1 3 8 8] opt [8 3 32 32] max [64 3 32 32]; input_mask min [1 8] opt [8 8] max [64 8]}`},
		{"one profile differing from the dynamic shapes", "m", block, func() []Graph {
			g := good()
			g[1].Profiles = []shapes.Profile{{Inputs: []shapes.InputProfile{{Name: "input_x", Min: []int64{1, 3, 8, 8}, Opt: []int64{8, 3, 16, 16}, Max: []int64{64, 3, 32, 32}}}}}
			return g
		}, Options{}, `graph "1": the given profile {input_x min [1 3 8 8] opt [8 3 16 16] max [64 3 32 32]} contradicts the graph's dynamic shapes`},
		{"ORT settings on TensorRT", "m", block, func() []Graph { g := good(); g[0].ExecutionProvider = "cuda"; return g }, Options{}, "are for ONNX Runtime"},
		{"profiles on ONNX Runtime", "m", block, func() []Graph {
			g := good()
			g[0].Backend, g[0].Profiles = BackendORT, []shapes.Profile{{}}
			return g
		}, Options{}, "optimization profiles are for TensorRT"},
		{"unknown execution provider", "m", block, func() []Graph {
			g := good()
			g[0].Backend, g[0].ExecutionProvider = BackendORT, "cpu"
			return g
		}, Options{}, `execution provider "cpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Write(dir, tt.ckpt, tt.block, tt.graphs(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			// Nothing is left behind.
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a failed Write left %d entries in dir", len(entries))
			}
		})
	}
}
