package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// tarOf packs a directory (under prefix inside the archive) plus extra
// hand-made entries.
func tarOf(t *testing.T, dir, prefix string, gz bool, extra ...*tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir != "" {
		err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: prefix + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range extra {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	name := "bundle.tar"
	data := buf.Bytes()
	if gz {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(data)
		zw.Close()
		data, name = zb.Bytes(), "bundle.tar.gz"
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenArchive(t *testing.T) {
	dir := bundletest.Write(t)
	want, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := want.Digest()
	for _, tc := range []struct {
		name   string
		prefix string
		gz     bool
	}{{"tar at root", "", false}, {"tar.gz in a top directory", "mybundle/", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			b, cleanup, err := bundle.OpenArchive(tarOf(t, dir, tc.prefix, tc.gz), tmp)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := b.Digest()
			if got != wantDigest {
				t.Fatalf("digest %s, want the directory's %s", got, wantDigest)
			}
			cleanup()
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Fatalf("cleanup left %v", entries)
			}
		})
	}
}

func TestOpenArchiveRefusesEscapes(t *testing.T) {
	dir := bundletest.Write(t)
	for _, tc := range []struct {
		name string
		h    *tar.Header
		want string
	}{
		{"dot-dot", &tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "outside the bundle"},
		{"absolute", &tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "outside the bundle"},
		{"symlink", &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "link or special file"},
		{"hard link", &tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "bundle.json"}, "link or special file"},
		{"device", &tar.Header{Name: "dev", Typeflag: tar.TypeChar}, "link or special file"},
		{"duplicate entry", &tar.Header{Name: "bundle.json", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			_, cleanup, err := bundle.OpenArchive(tarOf(t, dir, "", false, tc.h), tmp)
			defer cleanup()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Fatalf("a refused archive left %v behind", entries)
			}
		})
	}
	// Not an archive at all.
	junk := filepath.Join(t.TempDir(), "junk.tar.gz")
	os.WriteFile(junk, []byte("not gzip"), 0o644)
	if _, cleanup, err := bundle.OpenArchive(junk, t.TempDir()); err == nil || !strings.Contains(err.Error(), "gzip") {
		cleanup()
		t.Fatalf("got %v for a non-gzip file", err)
	}
}

// A .tgz whose gzip trailer (CRC-32 and length) is wrong or missing is
// refused: deflate has no checksum of its own, so without the trailer a
// corrupt archive could unpack to wrong bytes.
func TestOpenArchiveChecksTheGzipTrailer(t *testing.T) {
	dir := bundletest.Write(t)
	good, err := os.ReadFile(tarOf(t, dir, "", true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"crc flipped", func(b []byte) []byte { b[len(b)-8] ^= 0xff; return b }},
		{"trailer cut", func(b []byte) []byte { return b[:len(b)-8] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bundle.tgz")
			os.WriteFile(p, tc.edit(bytes.Clone(good)), 0o644)
			tmp := t.TempDir()
			_, cleanup, err := bundle.OpenArchive(p, tmp)
			defer cleanup()
			if err == nil || !strings.Contains(err.Error(), "gzip") {
				t.Fatalf("got %v, want a corrupt gzip error", err)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Fatalf("a refused archive left %v behind", entries)
			}
		})
	}
}

// Zero padding after the gzip stream (block-padded transfers) is not a
// corrupt archive.
func TestOpenArchiveToleratesPaddingAfterGzip(t *testing.T) {
	dir := bundletest.Write(t)
	good, err := os.ReadFile(tarOf(t, dir, "", true))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bundle.tgz")
	os.WriteFile(p, append(good, make([]byte, 512)...), 0o644)
	_, cleanup, err := bundle.OpenArchive(p, t.TempDir())
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
}
