package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
)

// Content-addressed blobs: verified downloads (FetchFile), damaged blobs
// refused, repaired on upload, verified in place.

func testFetchFile(t *testing.T, s artifacts.Store) {
	c := &Counting{Store: s}
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
	if got := c.Gets.Load(); got != 1 {
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
			c := &Counting{Store: s}
			got, err := tt.put(c)
			if err != nil || got != tt.ref {
				t.Fatalf("%s over a bit-flipped blob = %+v, %v", tt.name, got, err)
			}
			if c.Puts.Load() != 1 {
				t.Fatalf("%s over a bit-flipped blob of the right size made %d Puts, want 1 (the repair)", tt.name, c.Puts.Load())
			}
			if err := artifacts.VerifyBlob(t.Context(), s, tt.ref); err != nil {
				t.Fatalf("after %s the blob is still bad: %v", tt.name, err)
			}
			// Now it is right: the next put uploads nothing.
			c.Puts.Store(0)
			if _, err := tt.put(c); err != nil || c.Puts.Load() != 0 {
				t.Fatalf("%s over a good blob: %v, %d Puts, want none", tt.name, err, c.Puts.Load())
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
