package fsutil_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// OpenRegular refuses what is not a regular file at once, naming what it
// is, and opens a regular file (through a symlink too).
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "a FIFO (named pipe)"},
		{sock, ""}, // a socket cannot even be opened: refused all the same
		{"/dev/null", "a character device"},
		{dir, "a directory"},
	} {
		start := time.Now()
		_, err := fsutil.ReadRegular(tc.path)
		if err == nil || time.Since(start) > time.Second || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("ReadRegular(%s) = %v after %s, want an error naming %q", tc.path, err, time.Since(start), tc.want)
		}
		if tc.want != "" && !errors.Is(err, fsutil.ErrNotRegular) {
			t.Errorf("ReadRegular(%s): %v is not ErrNotRegular", tc.path, err)
		}
	}
	for _, p := range []string{file, link} {
		if b, err := fsutil.ReadRegular(p); err != nil || string(b) != "x" {
			t.Errorf("ReadRegular(%s) = %q, %v", p, b, err)
		}
	}
}

// WriteFileAtomic replaces a file whole, with the mode asked for, and
// leaves no temporary file beside it, also when it cannot write.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cache.json")
	for _, data := range []string{"first", "second, longer"} {
		if err := fsutil.WriteFileAtomic(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("read %q %v, want %q", got, err, data)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v %v, want 0600", fi.Mode(), err)
		}
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o600); err == nil {
		t.Fatal("a file in a missing directory was written")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %v, want the file alone", entries)
	}
}
