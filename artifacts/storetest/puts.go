package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
)

// Uploads: failed and cancelled puts, readers left open, PutFile and PutBytes
// (what they read, what they skip).

// failingReader yields n bytes from r, then fails with errBoom.
type failingReader struct {
	r io.Reader
	n int64
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errBoom
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	return n, err
}

func testFailedPut(t *testing.T, s artifacts.Store) {
	tests := []struct {
		name string
		r    func() io.Reader
		size int64
	}{
		{"error-midway", func() io.Reader { return &failingReader{stream(1, 4000), 1000} }, 4000},
		{"error-midway/size-unknown", func() io.Reader { return &failingReader{stream(1, 4000), 1000} }, -1},
		// Fails after the first 16 MiB part went up: the multipart upload
		// must be aborted, not completed.
		{"error-after-a-part", func() io.Reader { return &failingReader{stream(2, 20*mib), 17 * mib} }, 20 * mib},
		{"error-after-a-part/size-unknown", func() io.Reader { return &failingReader{stream(2, 20*mib), 17 * mib} }, -1},
		{"short-reader", func() io.Reader { return stream(3, 10) }, 4000},
		// A reader longer than its announced size is a caller bug too:
		// storing a prefix of it would hide the bug.
		{"long-reader", func() io.Reader { return stream(4, 5000) }, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, "failed/old", []byte("old content"))
			if err := s.Put(t.Context(), "failed/old", tt.r(), tt.size); err == nil {
				t.Fatal("Put over an existing object succeeded, want an error")
			}
			if got := get(t, s, "failed/old"); string(got) != "old content" {
				t.Fatalf("after a failed Put the object is %d bytes (%q…), want the old content", len(got), got[:min(len(got), 16)])
			}
			if err := s.Put(t.Context(), "failed/new", tt.r(), tt.size); err == nil {
				t.Fatal("Put of a new object succeeded, want an error")
			}
			if _, err := s.Stat(t.Context(), "failed/new"); !errors.Is(err, artifacts.ErrNotExist) {
				t.Fatalf("after a failed Put of a new key, Stat = %v, want ErrNotExist", err)
			}
			if keys := list(t, s, ""); !slices.Equal(keys, []string{"failed/old"}) {
				t.Fatalf("List after failed Puts = %q, want only [failed/old] (no temporary objects)", keys)
			}
		})
	}
}

func testCancelledPut(t *testing.T, s artifacts.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "cancelled", strings.NewReader("x"), 1); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	if _, err := s.Stat(t.Context(), "cancelled"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("Stat after a cancelled Put = %v, want ErrNotExist", err)
	}
}

// closeRecorder records whether Close was called.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func testPutKeepsReaderOpen(t *testing.T, s artifacts.Store) {
	r := &closeRecorder{Reader: strings.NewReader("abc")}
	if err := s.Put(t.Context(), "k", r, 3); err != nil {
		t.Fatal(err)
	}
	if r.closed {
		t.Fatal("Put closed the caller's reader; it belongs to the caller")
	}
}

func writeFile(t *testing.T, seed byte, n int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blob.bin")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, stream(seed, n)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func testPutFile(t *testing.T, s artifacts.Store) {
	c := &Counting{Store: s}
	const n = 3*mib + 17
	path := writeFile(t, 7, n)
	want := artifacts.Ref{SHA256: digest(7, n), Size: n}

	ref, err := artifacts.PutFile(t.Context(), c, path)
	if err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if ref != want {
		t.Fatalf("PutFile = %+v, want %+v (the file's sha256 and size)", ref, want)
	}
	if ref.Key() != artifacts.BlobKey(want.SHA256) {
		t.Fatalf("Ref.Key() = %q", ref.Key())
	}
	ref2, err := artifacts.PutFile(t.Context(), c, path)
	if err != nil {
		t.Fatalf("second PutFile: %v", err)
	}
	if ref2 != ref {
		t.Fatalf("second PutFile = %+v, want %+v", ref2, ref)
	}
	if got := c.Puts.Load(); got != 1 {
		t.Fatalf("two PutFile calls of the same file made %d Puts, want 1", got)
	}

	// A truncated blob (another size) under the digest is replaced.
	put(t, c, ref.Key(), []byte("truncated"))
	c.Puts.Store(0)
	if _, err := artifacts.PutFile(t.Context(), c, path); err != nil {
		t.Fatalf("PutFile over a truncated blob: %v", err)
	}
	if got := c.Puts.Load(); got != 1 {
		t.Fatalf("PutFile over a truncated blob made %d Puts, want 1", got)
	}
	dest := filepath.Join(t.TempDir(), "back")
	if err := artifacts.FetchFile(t.Context(), s, ref, dest); err != nil {
		t.Fatalf("FetchFile after repair: %v", err)
	}

	if _, err := artifacts.PutFile(t.Context(), c, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("PutFile of a missing file succeeded")
	}

	// The file changes (same size) between hashing and uploading: the
	// upload must not stay under the first digest.
	path2 := writeFile(t, 8, 1000)
	digest2 := digest(8, 1000)
	changer := &onLookup{Store: s, fn: func() {
		if err := os.WriteFile(path2, bytes.Repeat([]byte{'!'}, 1000), 0o644); err != nil {
			t.Error(err)
		}
	}}
	_, err = artifacts.PutFile(t.Context(), changer, path2)
	if err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("PutFile of a file that changed during the upload = %v, want an error saying it changed", err)
	}
	if _, err := s.Stat(t.Context(), artifacts.BlobKey(digest2)); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("a blob whose bytes do not match its digest was left: Stat = %v", err)
	}
}

// onLookup calls fn before every Stat, Get and Put: PutFile looks a large
// blob up (a Get that re-hashes it) between hashing the file and uploading
// it, and uploads a small one at once.
type onLookup struct {
	artifacts.Store
	fn func()
}

func (o *onLookup) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	o.fn()
	return o.Store.Put(ctx, key, r, size)
}

func (o *onLookup) Stat(ctx context.Context, key string) (artifacts.ObjectInfo, error) {
	o.fn()
	return o.Store.Stat(ctx, key)
}

func (o *onLookup) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	o.fn()
	return o.Store.Get(ctx, key)
}

func testPutBytes(t *testing.T, s artifacts.Store) {
	c := &Counting{Store: s}
	b := []byte("small blob")
	sum := sha256.Sum256(b)
	for range 2 {
		ref, err := artifacts.PutBytes(t.Context(), c, b)
		if err != nil {
			t.Fatalf("PutBytes: %v", err)
		}
		if ref.SHA256 != hex.EncodeToString(sum[:]) || ref.Size != int64(len(b)) {
			t.Fatalf("PutBytes = %+v", ref)
		}
	}
	if got := c.Puts.Load(); got != 1 {
		t.Fatalf("two PutBytes of the same bytes made %d Puts, want 1", got)
	}
	ref, err := artifacts.PutBytes(t.Context(), c, nil)
	if err != nil {
		t.Fatalf("PutBytes(empty): %v", err)
	}
	if got := get(t, s, ref.Key()); len(got) != 0 {
		t.Fatalf("empty blob came back as %d bytes", len(got))
	}
}
