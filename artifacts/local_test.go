package artifacts_test

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
	"syscall"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/artifacts/storetest"
)

func newLocal(t *testing.T) *artifacts.Local {
	t.Helper()
	l, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLocalContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) artifacts.Store { return newLocal(t) })
}

func TestLocalLayoutOnDisk(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	if err := l.Put(t.Context(), "runs/r1/run.json", strings.NewReader("{}"), 2); err != nil {
		t.Fatal(err)
	}
	// Keys are plain files, readable with ordinary tools.
	b, err := os.ReadFile(filepath.Join(l.Dir(), "runs", "r1", "run.json"))
	if err != nil || string(b) != "{}" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if got, want := l.String(), "file://"+filepath.ToSlash(l.Dir()); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// A symbolic link inside the root that leads outside must not be followed,
// for reads or for writes.
func TestLocalSymlinkEscape(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(l.Dir(), "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(l.Dir(), "file-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(l.Dir(), "relative-out")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, key := range []string{"out/secret", "file-out", "relative-out"} {
		if rc, err := l.Get(ctx, key); err == nil {
			rc.Close()
			t.Errorf("Get(%q) followed a link out of the store", key)
		}
		if _, err := l.Stat(ctx, key); err == nil {
			t.Errorf("Stat(%q) followed a link out of the store", key)
		}
	}
	err := l.Put(ctx, "out/new", strings.NewReader("x"), 1)
	if err == nil {
		t.Fatal("Put through a link out of the store succeeded")
	}
	if !strings.Contains(err.Error(), "outside") {
		t.Errorf("error %q does not explain the link leads outside", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Put wrote outside the store")
	}
	// Links are not objects: List skips them.
	if keys, err := l.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("List = %q, %v; want no keys", keys, err)
	}
	// Deleting the link key removes the link, never the target.
	if err := l.Delete(ctx, "file-out"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("Delete removed the link's target: %v", err)
	}
}

// A link that stays inside the root is followed.
func TestLocalSymlinkInside(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	if err := l.Put(t.Context(), "real/x", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(l.Dir(), "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat(t.Context(), "alias/x"); err != nil {
		t.Fatalf("Stat through an inside link: %v", err)
	}
}

func TestLocalDotDotKeys(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "store")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := artifacts.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, key := range []string{"../escaped", "a/../../escaped", "..", "a/.."} {
		if err := l.Put(t.Context(), key, strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "escaped")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a key with .. wrote outside the store")
	}
}

func TestLocalTempFiles(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	ctx := t.Context()
	if err := l.Put(ctx, "a/b", strings.NewReader("b"), 1); err != nil {
		t.Fatal(err)
	}
	// What a crash during Put leaves behind is not an object.
	if err := os.WriteFile(filepath.Join(l.Dir(), "a", ".tunefleet-tmp-CRASHED"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if keys, err := l.List(ctx, ""); err != nil || !slices.Equal(keys, []string{"a/b"}) {
		t.Fatalf("List = %q, %v; want [a/b]", keys, err)
	}
	if err := l.Put(ctx, "a/.tunefleet-tmp-x", strings.NewReader("x"), 1); err == nil {
		t.Fatal("a key named like a temporary file was accepted")
	}
	// Other dot names are ordinary keys.
	if err := l.Put(ctx, "a/.hidden", strings.NewReader("h"), 1); err != nil {
		t.Fatal(err)
	}
}

// A key cannot be an object and hold other keys: the error says so.
func TestLocalObjectVersusDirectory(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	ctx := t.Context()
	if err := l.Put(ctx, "a/b", strings.NewReader("b"), 1); err != nil {
		t.Fatal(err)
	}
	err := l.Put(ctx, "a/b/c", strings.NewReader("c"), 1)
	if err == nil || !strings.Contains(err.Error(), "is an object") {
		t.Errorf("Put under an object = %v, want an error saying a segment is an object", err)
	}
	err = l.Put(ctx, "a", strings.NewReader("a"), 1)
	if err == nil || !strings.Contains(err.Error(), "other keys exist under") {
		t.Errorf("Put over a directory = %v, want an error saying other keys exist under it", err)
	}
	if got, err := l.List(ctx, ""); err != nil || !slices.Equal(got, []string{"a/b"}) {
		t.Errorf("List = %q, %v; failed Puts must leave nothing", got, err)
	}
}

func TestLocalWrongSize(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	err := l.Put(t.Context(), "k", strings.NewReader("abcdef"), 3)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("Put with a reader longer than size = %v, want an error", err)
	}
	if _, err := l.Stat(t.Context(), "k"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("a wrong-size Put left an object: %v", err)
	}
}

func TestNewLocalErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		root, want string
	}{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "is not a directory"},
	}
	for _, tt := range tests {
		_, err := artifacts.NewLocal(tt.root)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.root) {
			t.Errorf("NewLocal(%q) = %v, want an error naming it and saying %q", tt.root, err, tt.want)
		}
	}
}

func TestLocalCheck(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := artifacts.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if err := os.Chmod(root, 0o555); err != nil {
			t.Fatal(err)
		}
		err := l.Check(t.Context())
		if err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("Check of a read-only directory = %v, want \"not writable\"", err)
		}
		os.Chmod(root, 0o755)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	err = l.Check(t.Context())
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), root) {
		t.Fatalf("Check of a removed directory = %v, want \"does not exist\" naming it", err)
	}
	// Put back at the same path, it is another directory.
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("Check of a replaced directory = %v, want \"replaced\"", err)
	}
}

func TestOpenLocal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		url  string
		want string // directory, relative to dir
	}{
		{"created/by/open", "created/by/open"},
		{"./dot", "dot"},
		{"file://rel/dir", "rel/dir"},
		{"file://" + filepath.ToSlash(filepath.Join(dir, "abs")), "abs"},
	}
	for _, tt := range tests {
		s, err := artifacts.Open(t.Context(), tt.url)
		if err != nil {
			t.Errorf("Open(%q): %v", tt.url, err)
			continue
		}
		l, ok := s.(*artifacts.Local)
		if !ok {
			t.Errorf("Open(%q) = %T, want *artifacts.Local", tt.url, s)
			continue
		}
		if want := filepath.Join(dir, tt.want); l.Dir() != want {
			t.Errorf("Open(%q).Dir() = %q, want %q", tt.url, l.Dir(), want)
		}
		l.Close()
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := artifacts.Open(t.Context(), file); err == nil {
		t.Errorf("Open of a regular file succeeded")
	}
}

func TestPutFileAsVerifiesTheGivenDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "engine")
	if err := os.WriteFile(p, []byte("engine bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := artifacts.PutBytes(ctx, artifacts.Store(s), []byte("engine bytes"))
	if err != nil {
		t.Fatal(err)
	}
	s.Delete(ctx, want.Key())
	wrong := artifacts.Ref{SHA256: strings.Repeat("ab", 32), Size: want.Size}
	if _, err := artifacts.PutFileAs(ctx, s, p, wrong); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("got %v, want a digest mismatch", err)
	}
	if _, err := s.Stat(ctx, wrong.Key()); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("a mismatched upload stayed under %s", wrong.Key())
	}
	if _, err := artifacts.PutFileAs(ctx, s, p, want); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.FetchFile(ctx, s, want, filepath.Join(t.TempDir(), "back")); err != nil {
		t.Fatal(err)
	}
}

// lateRightWriter is a store where, just after each Put, another writer
// puts the right bytes of a blob under the same key (it lands last).
type lateRightWriter struct {
	artifacts.Store
	right []byte
}

func (w lateRightWriter) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := w.Store.Put(ctx, key, r, size); err != nil {
		return err
	}
	return w.Store.Put(ctx, key, bytes.NewReader(w.right), int64(len(w.right)))
}

// A writer whose file changed while it uploaded does not remove the blob
// another writer has stored correctly under the same digest since.
func TestMismatchedUploadKeepsAnotherWritersGoodBlob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	local, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	right := []byte("engine bytes")
	sum := sha256.Sum256(right)
	ref := artifacts.Ref{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(right))}
	p := filepath.Join(t.TempDir(), "engine")
	if err := os.WriteFile(p, []byte("ENGINE BYTES"), 0o644); err != nil { // same size, other bytes
		t.Fatal(err)
	}
	s := lateRightWriter{Store: local, right: right}
	if _, err := artifacts.PutFileAs(ctx, s, p, ref); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("got %v, want a digest mismatch", err)
	}
	if err := artifacts.FetchFile(ctx, local, ref, filepath.Join(t.TempDir(), "back")); err != nil {
		t.Fatalf("the other writer's good blob is gone: %v", err)
	}
}

func TestReadObjectRefusesTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Put(ctx, "a/b.json", strings.NewReader("12345"), 5)
	if got, err := artifacts.ReadObject(ctx, s, "a/b.json", 5); err != nil || string(got) != "12345" {
		t.Fatalf("at the limit: %q, %v", got, err)
	}
	if _, err := artifacts.ReadObject(ctx, s, "a/b.json", 4); !errors.Is(err, artifacts.ErrTooLarge) || !strings.Contains(err.Error(), "a/b.json") || !strings.Contains(err.Error(), "over") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := artifacts.ReadObject(ctx, s, "a/none.json", 4); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

// A FIFO planted in the store is not an object, and getting it does not
// wait for a writer.
func TestLocalGetRefusesAFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	if _, err := s.Get(context.Background(), "pipe"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("Get of a FIFO: %v, want ErrNotExist", err)
	}
}
