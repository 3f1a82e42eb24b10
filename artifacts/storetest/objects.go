package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// The object contract: put, get, stat, list, delete, keys, concurrency.

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

// testCreate: PutNew writes where no object is and leaves one that is
// there as it was, through the store's own conditional write when it has
// one; of racing callers exactly one creates.
func testCreate(t *testing.T, s artifacts.Store) {
	ctx := context.Background()
	if _, ok := s.(artifacts.Creator); !ok {
		t.Fatalf("%T has no Create: PutNew would need a lock around every call", s)
	}
	ok, err := artifacts.PutNew(ctx, s, "once/a.json", []byte("first"))
	if err != nil || !ok {
		t.Fatalf("first PutNew = %v, %v; want created", ok, err)
	}
	ok, err = artifacts.PutNew(ctx, s, "once/a.json", []byte("second, longer"))
	if err != nil || ok {
		t.Fatalf("second PutNew = %v, %v; want not created, no error", ok, err)
	}
	if got := string(get(t, s, "once/a.json")); got != "first" {
		t.Fatalf("after a second PutNew the object holds %q, want the first write's", got)
	}
	const racers = 8
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := artifacts.PutNew(ctx, s, "once/raced.json", []byte(fmt.Sprintf("writer %d", i)))
			if err != nil {
				t.Error(err)
			}
			if ok {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := created.Load(); n != 1 {
		t.Fatalf("%d of %d racing PutNew calls created the object, want exactly 1", n, racers)
	}
	keys, err := s.List(ctx, "once/")
	if err != nil || len(keys) != 2 {
		t.Fatalf("List(once/) = %v, %v; want the two objects and no temporary files", keys, err)
	}
}
