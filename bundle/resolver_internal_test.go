package bundle

import (
	"os"
	"path/filepath"
	"testing"
)

// TestResolverAgreesWithResolve: the bundle's resolver, which remembers the
// directories it resolved, answers every path as Resolve does (the same
// path, or the same error), links inside and out, asked twice.
func TestResolverAgreesWithResolve(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mk := func(rel string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	mk("model.onnx")
	mk("samples/0/input_0.pb")
	mk("deep/a/b/c.pb")
	link("samples", "alias")                          // a directory link inside
	link("../model.onnx", "samples/link.onnx")        // a file link inside
	link(outside, "out")                              // a directory link out
	link(filepath.Join(outside, "secret"), "leak.pb") // a file link out
	link("../../..", "deep/a/up")                     // climbs out through a link

	tests := []string{
		"model.onnx", "samples/0/input_0.pb", "samples/0", "samples/0/", "./samples/0/input_0.pb",
		"deep/a/b/c.pb", "alias/0/input_0.pb", "samples/link.onnx",
		"out/secret", "leak.pb", "deep/a/up/x", "deep/a/up",
		"missing.pb", "samples/9/input_0.pb", "model.onnx/x",
		"", "/etc/passwd", "../x", "a\\b",
	}
	r := newResolver(root)
	for range 2 { // the second pass answers from what the first remembered
		for _, rel := range tests {
			want, werr := Resolve(root, rel)
			got, gerr := r.resolve(rel)
			if got != want || (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Errorf("resolve(%q) = %q, %v; Resolve = %q, %v", rel, got, gerr, want, werr)
			}
		}
	}
}
