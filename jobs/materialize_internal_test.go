package jobs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// materialize downloads a graph's files, verified, and opens them without
// re-hashing or re-decoding what it verified (bundle.OpenVerified). A blob
// whose bytes differ from run.json's digest, by a flipped byte half way or
// by being cut short, fails the download with an error naming the blob and
// both digests, and leaves no file behind.
func TestMaterializeVerifiesEveryFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := bundletest.Write(t)
	bundletest.Externalize(t, filepath.Join(src, bundletest.ONNXPath("0")), "weights.bin", true)
	b, err := bundle.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte // nil: the blob is intact
	}{
		{"intact", nil},
		{"a byte flipped mid-stream", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)/2] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := artifacts.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			spec := &RunSpec{Run: "r", Manifest: b.Manifest, Files: map[string]artifacts.Ref{}}
			const victim = "0/weights.bin"
			for _, f := range files {
				data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.Path)))
				if err != nil {
					t.Fatal(err)
				}
				ref := artifacts.Ref{SHA256: f.SHA256, Size: f.Size}
				if f.Path == victim && tc.damage != nil {
					data = tc.damage(data)
				}
				if err := store.Put(ctx, ref.Key(), bytes.NewReader(data), int64(len(data))); err != nil {
					t.Fatal(err)
				}
				spec.Files[f.Path] = ref
			}
			dir := t.TempDir()
			got, err := materialize(ctx, store, spec, "0", dir)
			if tc.damage == nil {
				if err != nil {
					t.Fatal(err)
				}
				gf, err := got.GraphFiles("0")
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range gf {
					if ref := spec.Files[f.Path]; f.SHA256 != ref.SHA256 || f.Size != ref.Size {
						t.Errorf("%s: %+v, run.json says %+v", f.Path, f, ref)
					}
				}
				if _, err := got.Samples("0"); err != nil {
					t.Errorf("samples of a verified bundle: %v", err)
				}
				return
			}
			want := spec.Files[victim].SHA256
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "corrupt or truncated") {
				t.Fatalf("got %v, want a corrupt-blob error naming sha256 %s", err, want)
			}
			if _, serr := os.Stat(filepath.Join(dir, "0", "weights.bin")); !os.IsNotExist(serr) {
				t.Errorf("a corrupt download was left at its destination (%v)", serr)
			}
		})
	}
}
