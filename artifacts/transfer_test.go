package artifacts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// randomFile writes n random bytes to a new file and returns its path and
// Ref.
func randomFile(t testing.TB, dir string, n int64) (string, artifacts.Ref) {
	t.Helper()
	path := filepath.Join(dir, "blob-"+rand.Text())
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for left := n; left > 0; {
		chunk := buf[:min(left, int64(len(buf)))]
		rand.Read(chunk)
		h.Write(chunk)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		left -= int64(len(chunk))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, artifacts.Ref{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}
}

// progressFunc adapts a function to artifacts.Progress.
type progressFunc func(n int64)

func (progressFunc) Expect(int64)    {}
func (p progressFunc) Moved(n int64) { p(n) }

// stores is both implementations, each on a fresh location.
func stores(t *testing.T) map[string]artifacts.Store {
	srv := testsvc.StartS3(t)
	l, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return map[string]artifacts.Store{"local": l, "s3": newS3(t, srv.Bucket(t))}
}

// A multipart upload (several parts, sent in parallel on S3) stores the
// file's bytes, and reports each byte once.
func TestPutFileAsMultipart(t *testing.T) {
	t.Parallel()
	path, ref := randomFile(t, t.TempDir(), 40<<20+123)
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var moved atomic.Int64
			ctx := artifacts.WithProgress(t.Context(), progressFunc(func(n int64) { moved.Add(n) }))
			if _, err := artifacts.PutFileAs(ctx, s, path, ref); err != nil {
				t.Fatalf("PutFileAs: %v", err)
			}
			if got := moved.Load(); got != ref.Size {
				t.Errorf("progress counted %d bytes, want %d", got, ref.Size)
			}
			if err := artifacts.VerifyBlob(t.Context(), s, ref); err != nil {
				t.Fatalf("VerifyBlob after the upload: %v", err)
			}
		})
	}
}

// An upload cut off half way leaves nothing under the key (nor anything
// listed), and the retry completes.
func TestPutFileAsCutOffHalfWay(t *testing.T) {
	t.Parallel()
	path, ref := randomFile(t, t.TempDir(), 48<<20)
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var moved atomic.Int64
			var once sync.Once
			ctx = artifacts.WithProgress(ctx, progressFunc(func(n int64) {
				if moved.Add(n) >= ref.Size/2 {
					once.Do(cancel) // the process dies, the link drops: the upload stops here
				}
			}))
			_, err := artifacts.PutFileAs(ctx, s, path, ref)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("PutFileAs cut off half way = %v, want context.Canceled", err)
			}
			if _, err := s.Stat(t.Context(), ref.Key()); !errors.Is(err, artifacts.ErrNotExist) {
				t.Fatalf("after a cut-off upload, Stat = %v, want ErrNotExist", err)
			}
			if keys, err := s.List(t.Context(), ""); err != nil || len(keys) != 0 {
				t.Fatalf("after a cut-off upload, List = %q, %v; want nothing", keys, err)
			}
			if _, err := artifacts.PutFileAs(t.Context(), s, path, ref); err != nil {
				t.Fatalf("retried PutFileAs: %v", err)
			}
			if err := artifacts.VerifyBlob(t.Context(), s, ref); err != nil {
				t.Fatalf("VerifyBlob after the retry: %v", err)
			}
		})
	}
}

// Connections reset under a multipart upload: minio-go retries the parts,
// and the blob that lands is the right one.
func TestPutFileAsThroughResets(t *testing.T) {
	t.Parallel()
	srv := testsvc.OwnS3(t, testsvc.S3Options{})
	cfg := srv.Bucket(t)
	p := testsvc.StartProxy(t, cfg.Endpoint[len("http://"):])
	cfg.Endpoint = "http://" + p.Addr
	s := newS3(t, cfg)
	path, ref := randomFile(t, t.TempDir(), 40<<20)
	var moved atomic.Int64
	var once sync.Once
	ctx := artifacts.WithProgress(t.Context(), progressFunc(func(n int64) {
		if moved.Add(n) >= ref.Size/2 {
			once.Do(func() { p.Reset() })
		}
	}))
	if _, err := artifacts.PutFileAs(ctx, s, path, ref); err != nil {
		// A reset may also end the upload; then nothing is visible and a
		// retry completes.
		if _, serr := s.Stat(t.Context(), ref.Key()); !errors.Is(serr, artifacts.ErrNotExist) {
			t.Fatalf("PutFileAs failed (%v) and left an object: Stat = %v", err, serr)
		}
		if _, err := artifacts.PutFileAs(t.Context(), s, path, ref); err != nil {
			t.Fatalf("retried PutFileAs: %v", err)
		}
	}
	if p.Resets() == 0 {
		t.Fatal("the proxy reset no connection")
	}
	if err := artifacts.VerifyBlob(t.Context(), s, ref); err != nil {
		t.Fatalf("VerifyBlob: %v", err)
	}
}

// PutFiles uploads every file; one that cannot be read fails the call,
// naming it, and stops the uploads not yet started.
func TestPutFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var files []artifacts.FileBlob
	for range 40 {
		path, ref := randomFile(t, dir, 1000)
		files = append(files, artifacts.FileBlob{Path: path, Ref: ref})
	}
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if err := artifacts.PutFiles(t.Context(), s, files, 8); err != nil {
				t.Fatalf("PutFiles: %v", err)
			}
			for _, f := range files {
				if err := artifacts.VerifyBlob(t.Context(), s, f.Ref); err != nil {
					t.Fatal(err)
				}
			}
			bad := append([]artifacts.FileBlob{{Path: filepath.Join(dir, "missing"), Ref: files[0].Ref}}, files...)
			err := artifacts.PutFiles(t.Context(), s, bad, 1)
			if err == nil || !strings.Contains(err.Error(), "missing") {
				t.Fatalf("PutFiles with a missing file = %v, want an error naming it", err)
			}
		})
	}
}

// A large blob comes down in parallel ranges (S3) and is reassembled byte
// for byte; a blob whose bytes differ in the middle, one cut short and one
// too long each give a clear error and leave no file at the destination.
func TestFetchFileRanges(t *testing.T) {
	t.Parallel()
	const n = 70<<20 + 12345 // five ranges, the last one short
	data := make([]byte, n)
	rand.Read(data)
	sum := sha256.Sum256(data)
	ref := artifacts.Ref{SHA256: hex.EncodeToString(sum[:]), Size: n}
	flip := bytes.Clone(data)
	flip[n/2] ^= 0x40
	tests := []struct {
		name   string
		stored []byte
		want   string // "" for success
	}{
		{"intact", data, ""},
		{"a byte flipped mid-stream", flip, "corrupt"},
		{"cut short", data[:n-rangeTail], "corrupt or truncated"},
		{"too long", append(bytes.Clone(data), "more"...), "more than the expected size"},
		{"missing the last range", data[:64<<20], "corrupt or truncated"},
	}
	for name, s := range stores(t) {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				if err := s.Put(t.Context(), ref.Key(), bytes.NewReader(tt.stored), int64(len(tt.stored))); err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				dest := filepath.Join(dir, "engine.plan")
				var moved atomic.Int64
				ctx := artifacts.WithProgress(t.Context(), progressFunc(func(n int64) { moved.Add(n) }))
				err := artifacts.FetchFile(ctx, s, ref, dest)
				if tt.want == "" {
					if err != nil {
						t.Fatalf("FetchFile: %v", err)
					}
					got, err := os.ReadFile(dest)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("the fetched file differs from the blob (%d bytes, %v)", len(got), err)
					}
					if moved.Load() < n {
						t.Errorf("progress counted %d bytes, want %d", moved.Load(), n)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ref.Key()) {
					t.Fatalf("FetchFile = %v, want an error naming the key and %q", err, tt.want)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Fatalf("a failed FetchFile left %v", entries)
				}
			})
		}
	}
}

// rangeTail is less than a range: the last range comes back short.
const rangeTail = 1000
