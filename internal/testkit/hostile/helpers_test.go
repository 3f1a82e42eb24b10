package hostile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// Paths in the default bundletest bundle: one MLP graph "0",
// input[N,4] → output[N,3] float32, N in [1, 8], samples of batch 1 and 4.
var (
	onnx0   = bundletest.ONNXPath("0")
	sample0 = bundletest.SamplePath("0", 0)
)

// valid writes the default valid bundle and returns its directory.
func valid(t *testing.T, opts ...bundletest.Option) string {
	t.Helper()
	return bundletest.Write(t, opts...)
}

// edited is a valid bundle whose manifest edit has broken.
func edited(edit func(*bundle.Manifest)) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := valid(t)
		bundletest.EditManifest(t, dir, edit)
		return dir
	}
}

// rawEdited is a valid bundle whose bundle.json text edit has broken; the
// edit must change something.
func rawEdited(edit func(string) string) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := valid(t)
		p := filepath.Join(dir, bundle.ManifestName)
		before, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		after := edit(string(before))
		if after == string(before) {
			t.Fatal("rawEdited: the edit changed nothing")
		}
		write(t, p, []byte(after))
		return dir
	}
}

// withFile is a valid bundle with the file at rel replaced by data.
func withFile(rel string, data []byte) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := valid(t)
		write(t, filepath.Join(dir, filepath.FromSlash(rel)), data)
		return dir
	}
}

// withTensor is a valid bundle with a sample file replaced by tensor.
func withTensor(rel string, tensor bundle.Tensor) func(*testing.T) string {
	return func(t *testing.T) string {
		b, err := bundle.EncodeTensorProto(tensor)
		if err != nil {
			t.Fatal(err)
		}
		return withFile(rel, b)(t)
	}
}

func write(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// outside writes a file outside any bundle and returns its path.
func outside(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "outside")
	write(t, p, data)
	return p
}

// linkedOut is a valid bundle whose file or directory rel is moved out of
// the bundle and replaced by a symbolic link to it.
func linkedOut(rel string) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := valid(t)
		src := filepath.Join(dir, filepath.FromSlash(rel))
		dst := filepath.Join(t.TempDir(), "moved")
		if err := os.Rename(src, dst); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dst, src); err != nil {
			t.Fatal(err)
		}
		return dir
	}
}

// entry is one hand-made archive entry.
type entry struct {
	h    tar.Header
	data []byte
}

// archiveOf packs a valid bundle's files (unless bare) plus extra entries
// into a .tgz (gz) or .tar, with post applied to the bytes.
func archiveOf(t *testing.T, bare, gz bool, extra []entry, post func([]byte) []byte) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if !bare {
		dir := valid(t)
		err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			data := read(t, p)
			if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range extra {
		h := e.h
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.data) > 0 {
			tw.Write(e.data)
		}
	}
	tw.Close()
	data := buf.Bytes()
	name := "bundle.tar"
	if gz {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(data)
		zw.Close()
		data, name = zb.Bytes(), "bundle.tgz"
	}
	if post != nil {
		data = post(data)
	}
	p := filepath.Join(t.TempDir(), name)
	write(t, p, data)
	return p
}

// bomb is a .tgz holding a valid bundle and n zero bytes in one more file.
func bomb(t *testing.T, n int64) string {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dir := valid(t)
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data := read(t, p)
		tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
		return nil
	})
	tw.Flush() // the last file's padding; no end blocks: the bomb follows
	p := filepath.Join(t.TempDir(), "bomb.tgz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	zw.Write(raw.Bytes())
	tw = tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "zeros.bin", Mode: 0o644, Size: n, Typeflag: tar.TypeReg})
	zero := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(zero)) {
		tw.Write(zero[:min(int64(len(zero)), left)])
	}
	tw.Close()
	zw.Close()
	return p
}

// manyEntries is a .tgz of a valid bundle plus n empty directories.
func manyEntries(t *testing.T, n int) string {
	t.Helper()
	extra := make([]entry, n)
	for i := range extra {
		extra[i] = entry{h: tar.Header{Name: "d" + strconv.Itoa(i) + "/", Typeflag: tar.TypeDir, Mode: 0o755}}
	}
	return archiveOf(t, false, true, extra, nil)
}
