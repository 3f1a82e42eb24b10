package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// bombOf writes a .tgz holding a valid bundle plus one extra file of n
// zero bytes, which gzip shrinks about a thousandfold.
func bombOf(t *testing.T, n int64) string {
	t.Helper()
	src := bundletest.Archive(t, bundletest.Write(t), "b.tar")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// The tar's two end blocks are dropped and the extra entry appended.
	raw = bytes.TrimRight(raw, "\x00")
	raw = append(raw, make([]byte, (512-len(raw)%512)%512)...)
	p := filepath.Join(t.TempDir(), "bomb.tgz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	zw.Write(raw)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "zeros.bin", Mode: 0o644, Size: n, Typeflag: tar.TypeReg})
	if _, err := io.CopyN(tw, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	return p
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A gzip bomb is refused while it unpacks, at a bounded cost, not once it
// has filled TMPDIR (issue 8, item 7: a 1 GiB bomb wrote 861 MB first).
func TestOpenArchiveRefusesABomb(t *testing.T) {
	p := bombOf(t, 256<<20)
	if fi, _ := os.Stat(p); fi.Size() > 2<<20 {
		t.Fatalf("the bomb is %d bytes compressed", fi.Size())
	}
	tmp := t.TempDir()
	_, cleanup, err := bundle.OpenArchive(p, tmp)
	cleanup()
	if err == nil || !strings.Contains(err.Error(), "compression ratio") {
		t.Fatalf("OpenArchive: %v, want a refusal naming the compression ratio", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("a refused archive left %v in its scratch directory", entries)
	}
}

// The unpacked size is capped by a configurable limit; an entry that would
// cross it is refused before any of it is written.
func TestOpenArchiveLimits(t *testing.T) {
	p := bombOf(t, 8<<20)
	lim := bundle.DefaultArchiveLimits()
	lim.MaxBytes = 4 << 20
	lim.MaxRatio = 0 // off: the byte cap alone
	_, cleanup, err := bundle.OpenArchiveWith(p, t.TempDir(), lim)
	cleanup()
	if err == nil || !strings.Contains(err.Error(), "more than 4 MiB") {
		t.Fatalf("OpenArchiveWith: %v, want a refusal naming the 4 MiB limit", err)
	}
	lim.MaxBytes = 64 << 20
	b, cleanup, err := bundle.OpenArchiveWith(p, t.TempDir(), lim)
	defer cleanup()
	if err != nil || b == nil {
		t.Fatalf("OpenArchiveWith under its limits: %v", err)
	}
}
