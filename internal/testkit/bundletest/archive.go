package bundletest

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Archive packs the bundle directory dir into a new archive named name
// (".tar", ".tgz" or ".tar.gz" decides the form) under tb.TempDir(), with
// bundle.json and every other file at the archive's root, and returns its
// path.
func Archive(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	defer f.Close()
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	tw := tar.NewWriter(w)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err != nil {
		tb.Fatalf("bundletest: archive %s: %v", dir, err)
	}
	return p
}
