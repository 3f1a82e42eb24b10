package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// Run runs the contract against stores made by newStore, which must return a
// fresh, empty store each time it is called (once per subtest).
func Run(t *testing.T, newStore func(t *testing.T) artifacts.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s artifacts.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Stat", testStat},
		{"ModTime", testModTime},
		{"Missing", testMissing},
		{"List", testList},
		{"ListInvalidPrefix", testListInvalidPrefix},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"ConcurrentPuts", testConcurrentPuts},
		{"FailedPut", testFailedPut},
		{"CancelledPut", testCancelledPut},
		{"PutKeepsReaderOpen", testPutKeepsReaderOpen},
		{"PutFile", testPutFile},
		{"PutBytes", testPutBytes},
		{"PutRepairsBitFlippedBlob", testPutRepairsBitFlippedBlob},
		{"VerifyBlob", testVerifyBlob},
		{"FetchFile", testFetchFile},
		{"FetchFileCorrupt", testFetchFileCorrupt},
		{"JSON", testJSON},
		{"NamedObjects", testNamedObjects},
		{"String", testString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

const mib = 1 << 20

// stream is n pseudo-random bytes from seed, as a reader that is not
// seekable and has no ReadAt, so stores cannot take a shortcut.
func stream(seed byte, n int64) io.Reader {
	return struct{ io.Reader }{io.LimitReader(rand.NewChaCha8([32]byte{seed}), n)}
}

// digest is the sha256 (hex) of stream(seed, n).
func digest(seed byte, n int64) string {
	h := sha256.New()
	io.Copy(h, stream(seed, n))
	return hex.EncodeToString(h.Sum(nil))
}

func put(t *testing.T, s artifacts.Store, key string, b []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s artifacts.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): reading: %v", key, err)
	}
	return b
}

func list(t *testing.T, s artifacts.Store, prefix string) []string {
	t.Helper()
	keys, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func testRoundTrip(t *testing.T, s artifacts.Store) {
	tests := []struct {
		name      string
		n         int64
		sizeKnown bool
	}{
		{"empty", 0, true},
		{"empty/size-unknown", 0, false},
		{"one-byte", 1, true},
		{"one-byte/size-unknown", 1, false},
		{"20MiB", 20 * mib, true}, // above minio-go's 16 MiB single-PUT limit: multipart
		{"20MiB/size-unknown", 20 * mib, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "round/trip/" + strings.ReplaceAll(tt.name, "/", "-")
			seed := byte(i + 1)
			size := tt.n
			if !tt.sizeKnown {
				size = -1
			}
			if err := s.Put(t.Context(), key, stream(seed, tt.n), size); err != nil {
				t.Fatalf("Put(%d bytes, size %d): %v", tt.n, size, err)
			}
			rc, err := s.Get(t.Context(), key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			h := sha256.New()
			n, err := io.Copy(h, rc)
			rc.Close()
			if err != nil {
				t.Fatalf("reading: %v", err)
			}
			if n != tt.n {
				t.Fatalf("got %d bytes back, stored %d", n, tt.n)
			}
			if got, want := hex.EncodeToString(h.Sum(nil)), digest(seed, tt.n); got != want {
				t.Fatalf("content differs: sha256 %s, stored %s", got, want)
			}
			info, err := s.Stat(t.Context(), key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			if info.Size != tt.n {
				t.Errorf("Stat size %d, want %d", info.Size, tt.n)
			}
		})
	}
}

func testOverwrite(t *testing.T, s artifacts.Store) {
	put(t, s, "x/obj", []byte("a longer first version"))
	put(t, s, "x/obj", []byte("v2"))
	if got := get(t, s, "x/obj"); string(got) != "v2" {
		t.Fatalf("after overwrite got %q, want %q", got, "v2")
	}
	info, err := s.Stat(t.Context(), "x/obj")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != 2 {
		t.Errorf("size after overwrite %d, want 2", info.Size)
	}
	if keys := list(t, s, ""); !slices.Equal(keys, []string{"x/obj"}) {
		t.Errorf("List after overwrite = %q, want [x/obj]", keys)
	}
}

func testStat(t *testing.T, s artifacts.Store) {
	sizes := map[string]int{"s/zero": 0, "s/one": 1, "s/kib": 1024, "s/odd": 4097}
	for k, n := range sizes {
		put(t, s, k, bytes.Repeat([]byte{'z'}, n))
	}
	for k, n := range sizes {
		info, err := s.Stat(t.Context(), k)
		if err != nil {
			t.Fatalf("Stat(%q): %v", k, err)
		}
		if info.Key != k || info.Size != int64(n) || info.ModTime.IsZero() {
			t.Errorf("Stat(%q) = %+v, want key %q, size %d, a mod time", k, info, k, n)
		}
	}
}

// testModTime: store GC judges a blob's age by Stat's mod time (its grace
// period protects what a run in flight has just written), so the time must
// be when the object was written, on the clock a reader compares it with,
// and a rewrite must make the object young again. S3 keeps whole seconds,
// hence the second of slack either side.
func testModTime(t *testing.T, s artifacts.Store) {
	before := time.Now().Add(-time.Second)
	put(t, s, "m/obj", []byte("one"))
	after := time.Now().Add(time.Second)
	first, err := s.Stat(t.Context(), "m/obj")
	if err != nil {
		t.Fatal(err)
	}
	if first.ModTime.Before(before) || first.ModTime.After(after) {
		t.Errorf("ModTime %v of an object written between %v and %v", first.ModTime, before, after)
	}
	put(t, s, "m/obj", []byte("two"))
	second, err := s.Stat(t.Context(), "m/obj")
	if err != nil {
		t.Fatal(err)
	}
	if second.ModTime.Before(first.ModTime) {
		t.Errorf("ModTime went back from %v to %v on a rewrite", first.ModTime, second.ModTime)
	}
	if err := s.Delete(t.Context(), "m/obj"); err != nil {
		t.Fatal(err)
	}
	if keys := list(t, s, "m/"); len(keys) != 0 {
		t.Errorf("List after Delete = %q", keys)
	}
}

func testMissing(t *testing.T, s artifacts.Store) {
	put(t, s, "dir/file", []byte("x"))
	// "dir" holds keys but is no object; "dir/file/below" is under an
	// object; "nope" is nothing at all.
	for _, key := range []string{"nope", "dir", "dir/other", "dir/file/below", "blobs/sha256/00"} {
		if _, err := s.Get(t.Context(), key); !errors.Is(err, artifacts.ErrNotExist) {
			t.Errorf("Get(%q) = %v, want ErrNotExist", key, err)
		}
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, artifacts.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want ErrNotExist", key, err)
		}
		var v any
		if err := artifacts.GetJSON(t.Context(), s, key, &v); !errors.Is(err, artifacts.ErrNotExist) {
			t.Errorf("GetJSON(%q) = %v, want ErrNotExist", key, err)
		}
	}
}

func testList(t *testing.T, s artifacts.Store) {
	keys := []string{
		"runs/r1/run.json",
		"runs/r1/graphs/0/result.json",
		"runs/r1/graphs/1/result.json",
		"runs/r10/run.json",
		"runs/r1.txt",
		"results/abc.json",
		"blobs/sha256/aa",
		"top",
	}
	for _, k := range keys {
		put(t, s, k, []byte(k))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"blobs/sha256/aa", "results/abc.json", "runs/r1.txt", "runs/r1/graphs/0/result.json", "runs/r1/graphs/1/result.json", "runs/r1/run.json", "runs/r10/run.json", "top"}},
		{"runs/r1/", []string{"runs/r1/graphs/0/result.json", "runs/r1/graphs/1/result.json", "runs/r1/run.json"}},
		{"runs/r1/graphs/", []string{"runs/r1/graphs/0/result.json", "runs/r1/graphs/1/result.json"}},
		// A prefix is a plain string match, as on S3: without the trailing
		// slash "runs/r1" also matches "runs/r10/…" and "runs/r1.txt".
		{"runs/r1", []string{"runs/r1.txt", "runs/r1/graphs/0/result.json", "runs/r1/graphs/1/result.json", "runs/r1/run.json", "runs/r10/run.json"}},
		{"runs/r1/run.json", []string{"runs/r1/run.json"}},
		{"r", []string{"results/abc.json", "runs/r1.txt", "runs/r1/graphs/0/result.json", "runs/r1/graphs/1/result.json", "runs/r1/run.json", "runs/r10/run.json"}},
		{"to", []string{"top"}},
		{"top/", nil}, // under an object: nothing
		{"nope/", nil},
		{"runs/r2", nil},
	}
	for _, tt := range tests {
		got := list(t, s, tt.prefix)
		if !slices.Equal(got, tt.want) {
			t.Errorf("List(%q) =\n  %q\nwant\n  %q", tt.prefix, got, tt.want)
		}
		if !slices.IsSorted(got) {
			t.Errorf("List(%q) is not sorted: %q", tt.prefix, got)
		}
	}
}

func testListInvalidPrefix(t *testing.T, s artifacts.Store) {
	for _, p := range []string{"/abs", "../", "a/../", "a//b", "./x", `a\b`} {
		if keys, err := s.List(t.Context(), p); err == nil {
			t.Errorf("List(%q) = %q, want an error", p, keys)
		}
	}
}

func testDelete(t *testing.T, s artifacts.Store) {
	put(t, s, "d/a/x", []byte("x"))
	put(t, s, "d/b", []byte("b"))
	for range 2 { // deleting twice is fine
		if err := s.Delete(t.Context(), "d/a/x"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := s.Stat(t.Context(), "d/a/x"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("Stat after Delete = %v, want ErrNotExist", err)
	}
	if err := s.Delete(t.Context(), "never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if got := list(t, s, ""); !slices.Equal(got, []string{"d/b"}) {
		t.Fatalf("List after Delete = %q, want [d/b]", got)
	}
	// The deleted key's former "directory" can become an object.
	put(t, s, "d/a", []byte("now an object"))
	if got := get(t, s, "d/a"); string(got) != "now an object" {
		t.Fatalf("got %q", got)
	}
}

func testInvalidKeys(t *testing.T, s artifacts.Store) {
	bad := []string{"", "../x", "a/../../x", "/abs", "a//b", "a/", "a/./b", `a\b`, "..", ".", "a\x00b", "a\nb"}
	for _, key := range bad {
		if err := s.Put(t.Context(), key, strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%q) succeeded, want an error", key)
		}
		if rc, err := s.Get(t.Context(), key); err == nil {
			rc.Close()
			t.Errorf("Get(%q) succeeded, want an error", key)
		}
		if _, err := s.Stat(t.Context(), key); err == nil {
			t.Errorf("Stat(%q) succeeded, want an error", key)
		}
		if err := s.Delete(t.Context(), key); err == nil {
			t.Errorf("Delete(%q) succeeded, want an error", key)
		}
	}
	if got := list(t, s, ""); len(got) != 0 {
		t.Errorf("invalid keys left objects: %q", got)
	}
}

func testConcurrentPuts(t *testing.T, s artifacts.Store) {
	const writers = 8
	contents := make([][]byte, writers)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 256<<10+i*1000)
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.Put(context.Background(), "same/key", bytes.NewReader(contents[i]), int64(len(contents[i])))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	got := get(t, s, "same/key")
	if !slices.ContainsFunc(contents, func(c []byte) bool { return bytes.Equal(c, got) }) {
		t.Fatalf("after %d concurrent Puts the object (%d bytes, starting %q) is none of the writers' contents", writers, len(got), got[:min(len(got), 8)])
	}
	if keys := list(t, s, ""); !slices.Equal(keys, []string{"same/key"}) {
		t.Fatalf("List after concurrent Puts = %q, want [same/key]", keys)
	}
}

var errBoom = errors.New("storetest: reader failed on purpose")

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

// counting counts the Puts and Gets that reach the store.
type counting struct {
	artifacts.Store
	puts, gets atomic.Int64
}

func (c *counting) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	c.puts.Add(1)
	return c.Store.Put(ctx, key, r, size)
}

func (c *counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
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
	c := &counting{Store: s}
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
	if got := c.puts.Load(); got != 1 {
		t.Fatalf("two PutFile calls of the same file made %d Puts, want 1", got)
	}

	// A truncated blob (another size) under the digest is replaced.
	put(t, c, ref.Key(), []byte("truncated"))
	c.puts.Store(0)
	if _, err := artifacts.PutFile(t.Context(), c, path); err != nil {
		t.Fatalf("PutFile over a truncated blob: %v", err)
	}
	if got := c.puts.Load(); got != 1 {
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
	c := &counting{Store: s}
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
	if got := c.puts.Load(); got != 1 {
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

func testFetchFile(t *testing.T, s artifacts.Store) {
	c := &counting{Store: s}
	const n = 2*mib + 5
	src := writeFile(t, 9, n)
	ref, err := artifacts.PutFile(t.Context(), s, src)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "nested", "dir", "engine.plan")
	if err := artifacts.FetchFile(t.Context(), c, ref, dest); err != nil {
		t.Fatalf("FetchFile: %v", err)
	}
	if got := fileDigest(t, dest); got != ref.SHA256 {
		t.Fatalf("fetched file sha256 %s, want %s", got, ref.SHA256)
	}
	// Already there with the right content: nothing is downloaded.
	if err := artifacts.FetchFile(t.Context(), c, ref, dest); err != nil {
		t.Fatalf("second FetchFile: %v", err)
	}
	if got := c.gets.Load(); got != 1 {
		t.Fatalf("two FetchFile calls made %d Gets, want 1", got)
	}
	// A dest with other content is replaced.
	if err := os.WriteFile(dest, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.FetchFile(t.Context(), c, ref, dest); err != nil {
		t.Fatalf("FetchFile over a stale file: %v", err)
	}
	if got := fileDigest(t, dest); got != ref.SHA256 {
		t.Fatalf("stale dest not replaced: sha256 %s", got)
	}
	noTemps(t, filepath.Dir(dest), "engine.plan")

	missing := artifacts.Ref{SHA256: strings.Repeat("ab", 32), Size: 3}
	if err := artifacts.FetchFile(t.Context(), s, missing, filepath.Join(t.TempDir(), "m")); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("FetchFile of a missing blob = %v, want ErrNotExist", err)
	}
	for _, bad := range []artifacts.Ref{{SHA256: "../../etc/passwd", Size: 1}, {SHA256: strings.Repeat("AB", 32), Size: 1}, {SHA256: ref.SHA256, Size: -1}} {
		if err := artifacts.FetchFile(t.Context(), s, bad, filepath.Join(t.TempDir(), "m")); err == nil {
			t.Errorf("FetchFile(%+v) succeeded, want an invalid-ref error", bad)
		}
	}
}

func testFetchFileCorrupt(t *testing.T, s artifacts.Store) {
	good := []byte("the real engine bytes")
	ref, err := artifacts.PutBytes(t.Context(), s, good)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		stored []byte
	}{
		{"same-size", []byte("THE REAL ENGINE BYTES")},
		{"truncated", good[:5]},
		{"longer", append(slices.Clone(good), "+extra"...)},
		{"empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, ref.Key(), tt.stored)
			dir := t.TempDir()
			dest := filepath.Join(dir, "engine.plan")
			err := artifacts.FetchFile(t.Context(), s, ref, dest)
			if err == nil {
				t.Fatal("FetchFile of a corrupt blob succeeded")
			}
			for _, want := range []string{"corrupt", ref.Key(), ref.SHA256} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a corrupt download left %s (stat: %v)", dest, err)
			}
			noTemps(t, dir, "")
		})
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// noTemps fails if dir holds anything but the named file (if any).
func noTemps(t *testing.T, dir, keep string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != keep {
			t.Errorf("%s holds a leftover %q", dir, e.Name())
		}
	}
}

type manifest struct {
	Format string            `json:"format"`
	Graphs []artifacts.Ref   `json:"graphs"`
	Info   map[string]string `json:"info"`
}

func testJSON(t *testing.T, s artifacts.Store) {
	in := manifest{
		Format: "tunefleet.test/v1",
		Graphs: []artifacts.Ref{{SHA256: strings.Repeat("0", 64), Size: 1}, {SHA256: strings.Repeat("f", 64), Size: 2}},
		Info:   map[string]string{"gpu": "H100", "ünïcode": "✓"},
	}
	key := artifacts.StateKey("run-1")
	if err := artifacts.PutJSON(t.Context(), s, key, in); err != nil {
		t.Fatalf("PutJSON: %v", err)
	}
	var out manifest
	if err := artifacts.GetJSON(t.Context(), s, key, &out); err != nil {
		t.Fatalf("GetJSON: %v", err)
	}
	if out.Format != in.Format || !slices.Equal(out.Graphs, in.Graphs) || out.Info["ünïcode"] != "✓" || len(out.Info) != 2 {
		t.Fatalf("GetJSON = %+v, want %+v", out, in)
	}
	if raw := get(t, s, key); !bytes.Contains(raw, []byte("\n  \"format\"")) {
		t.Errorf("stored JSON is not indented:\n%s", raw)
	}

	put(t, s, "bad.json", []byte("{not json"))
	err := artifacts.GetJSON(t.Context(), s, "bad.json", &out)
	if err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("GetJSON of invalid JSON = %v, want an error naming the key", err)
	}
	if err := artifacts.PutJSON(t.Context(), s, "chan.json", make(chan int)); err == nil {
		t.Fatal("PutJSON of an unencodable value succeeded")
	}
	if _, err := s.Stat(t.Context(), "chan.json"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("a failed PutJSON left an object: %v", err)
	}
}

func testString(t *testing.T, s artifacts.Store) {
	if s.String() == "" {
		t.Fatal("String() is empty")
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check on a working store: %v", err)
	}
}

// testNamedObjects: UploadFile and DownloadFile, for objects whose key
// is a name (timing caches, published results), of a size that is more
// than one multipart part.
func testNamedObjects(t *testing.T, s artifacts.Store) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "cache")
	want, err := io.ReadAll(stream(7, 17*mib))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.UploadFile(ctx, s, "timing-caches/p/c.cache", src); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "fetched")
	if err := artifacts.DownloadFile(ctx, s, "timing-caches/p/c.cache", dest); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, want) {
		t.Fatalf("downloaded %d bytes, not the %d uploaded", len(got), len(want))
	}
	// Missing: ErrNotExist, and no file left behind.
	missing := filepath.Join(dir, "missing")
	if err := artifacts.DownloadFile(ctx, s, "timing-caches/p/none", missing); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("download of a missing key: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed download left %s: %v", missing, err)
	}
}

// flipped is b with one bit of its middle byte flipped: the same size, so
// only a content check tells it from b.
func flipped(b []byte) []byte {
	out := slices.Clone(b)
	out[len(out)/2] ^= 0x01
	return out
}

// A blob of the right size whose bytes rotted is not "already there": every
// way of putting a blob overwrites it with the right bytes (issue 8, item 6).
func testPutRepairsBitFlippedBlob(t *testing.T, s artifacts.Store) {
	const n = 1*mib + 3
	path := writeFile(t, 11, n)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref := artifacts.Ref{SHA256: digest(11, n), Size: n}
	small := []byte("a small state blob")
	smallSum := sha256.Sum256(small)
	smallRef := artifacts.Ref{SHA256: hex.EncodeToString(smallSum[:]), Size: int64(len(small))}
	tests := []struct {
		name string
		ref  artifacts.Ref
		good []byte
		put  func(c artifacts.Store) (artifacts.Ref, error)
	}{
		{"PutFile", ref, good, func(c artifacts.Store) (artifacts.Ref, error) { return artifacts.PutFile(t.Context(), c, path) }},
		{"PutFileAs", ref, good, func(c artifacts.Store) (artifacts.Ref, error) { return artifacts.PutFileAs(t.Context(), c, path, ref) }},
		{"PutBytes", smallRef, small, func(c artifacts.Store) (artifacts.Ref, error) { return artifacts.PutBytes(t.Context(), c, small) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, tt.ref.Key(), flipped(tt.good))
			c := &counting{Store: s}
			got, err := tt.put(c)
			if err != nil || got != tt.ref {
				t.Fatalf("%s over a bit-flipped blob = %+v, %v", tt.name, got, err)
			}
			if c.puts.Load() != 1 {
				t.Fatalf("%s over a bit-flipped blob of the right size made %d Puts, want 1 (the repair)", tt.name, c.puts.Load())
			}
			if err := artifacts.VerifyBlob(t.Context(), s, tt.ref); err != nil {
				t.Fatalf("after %s the blob is still bad: %v", tt.name, err)
			}
			// Now it is right: the next put uploads nothing.
			c.puts.Store(0)
			if _, err := tt.put(c); err != nil || c.puts.Load() != 0 {
				t.Fatalf("%s over a good blob: %v, %d Puts, want none", tt.name, err, c.puts.Load())
			}
		})
	}
}

// VerifyBlob tells a good blob from a missing, rotted, truncated or longer one.
func testVerifyBlob(t *testing.T, s artifacts.Store) {
	good := []byte("the engine, as its digest says")
	ref, err := artifacts.PutBytes(t.Context(), s, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := artifacts.VerifyBlob(t.Context(), s, ref); err != nil {
		t.Fatalf("VerifyBlob of a good blob: %v", err)
	}
	tests := []struct {
		name   string
		stored []byte // nil: deleted
		want   error
	}{
		{"bit-flipped", flipped(good), artifacts.ErrCorrupt},
		{"truncated", good[:4], artifacts.ErrCorrupt},
		{"longer", append(slices.Clone(good), '!'), artifacts.ErrCorrupt},
		{"missing", nil, artifacts.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stored == nil {
				if err := s.Delete(t.Context(), ref.Key()); err != nil {
					t.Fatal(err)
				}
			} else {
				put(t, s, ref.Key(), tt.stored)
			}
			err := artifacts.VerifyBlob(t.Context(), s, ref)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), ref.Key()) {
				t.Fatalf("VerifyBlob = %v, want %v naming %s", err, tt.want, ref.Key())
			}
		})
	}
	if err := artifacts.VerifyBlob(t.Context(), s, artifacts.Ref{SHA256: "nothex", Size: 1}); err == nil {
		t.Fatal("VerifyBlob accepted a malformed ref")
	}
}
