package bundle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

func TestResolve(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	writeFile(t, filepath.Join(root, "a", "f.pb"), []byte("x"))
	writeFile(t, filepath.Join(outside, "secret"), []byte("x"))
	for _, l := range []struct{ name, target string }{
		{"a/in-link", "f.pb"},      // relative, stays inside
		{"a/up-link", "../a/f.pb"}, // relative through .., stays inside
		{"out-file", filepath.Join(outside, "secret")},
		{"out-dir", outside},
		{"rel-out", "../outside/secret"}, // relative, leaves
		{"dangling", filepath.Join(root, "no")},
		{"root-link", root}, // a link to the root itself
	} {
		if err := os.Symlink(l.target, filepath.Join(root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	// The bundle root itself may be reached through a link.
	linkedRoot := filepath.Join(base, "linked-root")
	if err := os.Symlink(root, linkedRoot); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		root, rel string
		want      string // "" means success
	}{
		{root, "a/f.pb", ""},
		{root, "a", ""},
		{root, ".", ""},
		{root, "a/./f.pb", ""},
		{root, "a/in-link", ""},
		{root, "a/up-link", ""},
		{root, "root-link/a/f.pb", ""},
		{linkedRoot, "a/f.pb", ""},
		{linkedRoot, "a/in-link", ""},
		{root, "", "empty path"},
		{root, "/etc/passwd", "is absolute"},
		{root, "..", "escapes the bundle"},
		{root, "../outside/secret", "escapes the bundle"},
		{root, "a/../a/f.pb", "escapes the bundle"},
		{root, `a\f.pb`, "backslash"},
		{root, "a/f.pb\x00", "NUL"},
		{root, "a/missing.pb", `path "a/missing.pb" does not exist in the bundle`},
		{root, "dangling", "does not exist in the bundle"},
		{root, "out-file", "leads outside the bundle"},
		{root, "out-dir/secret", "leads outside the bundle"},
		{root, "rel-out", "leads outside the bundle"},
		{linkedRoot, "out-file", "leads outside the bundle"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(filepath.Base(tt.root)+":"+tt.rel, "/", "|"), func(t *testing.T) {
			got, err := bundle.Resolve(tt.root, tt.rel)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Resolve(%q): %v", tt.rel, err)
				}
				if want := filepath.Join(tt.root, filepath.FromSlash(tt.rel)); got != want {
					t.Errorf("Resolve(%q) = %s, want %s", tt.rel, got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve(%q) = %q, %v; want an error saying %q", tt.rel, got, err, tt.want)
			}
		})
	}
}

// A bundle opened as "." (`producer submit .`) resolves its files.
func TestOpenDot(t *testing.T) {
	dir := bundletest.Write(t)
	t.Chdir(dir)
	b, err := bundle.Open(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Digest(); err != nil {
		t.Fatal(err)
	}
}
