package bundle_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// ONNX external data inside the bundle is part of the graph's files: listed
// by Paths and Files (so submit uploads it and the worker downloads it next
// to the ONNX file) and digested (issue 8, item 7).
func TestExternalDataIsPartOfTheGraph(t *testing.T) {
	dir := bundletest.Write(t)
	before := mustOpen(t, dir)
	d0 := must(before.Digest())
	bundletest.Externalize(t, filepath.Join(dir, onnx0), "weights/mlp.bin", true)
	b := mustOpen(t, dir)
	want := "0/weights/mlp.bin"
	g, _ := b.Manifest.Graph("0")
	if !slices.Contains(g.Paths(), want) {
		t.Errorf("Paths() = %v, want %s in it", g.Paths(), want)
	}
	files := must(b.Files())
	if !slices.ContainsFunc(files, func(f bundle.FileDigest) bool { return f.Path == want }) {
		t.Errorf("Files() = %v, want %s in it", files, want)
	}
	d1 := must(b.Digest())
	writeFile(t, filepath.Join(dir, "0", "weights", "mlp.bin"), append(readFile(t, filepath.Join(dir, "0", "weights", "mlp.bin")), 0))
	d2 := must(mustOpen(t, dir).Digest())
	if d0 == d1 || d1 == d2 {
		t.Errorf("digests %s, %s, %s: the external data is not digested", d0, d1, d2)
	}
	// What Open derived travels in the manifest (run.json) and is checked
	// against the ONNX file when the worker opens its copy.
	bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].ExternalData = []string{want} })
	mustOpen(t, dir)
	bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].ExternalData = []string{"0/other.bin"} })
	if _, err := bundle.Open(dir); err == nil || !strings.Contains(err.Error(), "external_data") {
		t.Errorf("a manifest listing other external data than the ONNX file's: %v", err)
	}
}

// External data that leaves the bundle, or is not there, is refused: an
// ONNX file is a pointer to files, and a worker must read only the bundle.
func TestExternalDataOutsideTheBundleIsRefused(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.bin")
	writeFile(t, outside, make([]byte, 4096))
	tests := []struct {
		name     string
		location string
		prepare  func(t *testing.T, dir string)
		want     string
	}{
		{"parent directory", "../../outside.bin", nil, "escapes"},
		{"parent inside a path", "w/../../x.bin", nil, "escapes"},
		{"absolute", "/proc/self/environ", nil, "absolute"},
		{"absolute to a file that exists", outside, nil, "absolute"},
		{"missing", "missing.bin", nil, "does not exist"},
		{"backslash", `..\..\outside.bin`, nil, "backslash"},
		{"symlink out of the bundle", "link.bin", func(t *testing.T, dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "0", "link.bin")); err != nil {
				t.Fatal(err)
			}
		}, "outside the bundle"},
		{"a directory", "wdir", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "0", "wdir"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			bundletest.Externalize(t, filepath.Join(dir, onnx0), tc.location, false)
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			_, err := bundle.Open(dir)
			if err == nil || !bundle.IsInvalid(err) {
				t.Fatalf("Open: %v, want an InvalidError", err)
			}
			for _, w := range []string{"external data", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q: %v", w, err)
				}
			}
		})
	}
}
