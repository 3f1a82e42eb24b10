package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSyncTree(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o644)
	os.Symlink("f", filepath.Join(dir, "a", "b", "link")) // skipped, not followed
	if err := SyncTree(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncTree(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncTree of a missing directory succeeded")
	}
}
