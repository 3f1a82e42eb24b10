package fsutil_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// A killed process's directories are removed by the next one on the same
// directory; a live process's, and other files, are kept.
func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mine, err := fsutil.MkdirTempOwned(dir, "tunefleet-task-")
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "tunefleet-task-"+strconv.Itoa(dead.Process.Pid)+"-123")
	other := filepath.Join(dir, "tunefleet-task-notapid")
	for _, d := range []string{stale, other} {
		if err := os.MkdirAll(filepath.Join(d, "bundle"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := fsutil.RemoveOrphans(dir, "tunefleet-task-")
	if err != nil || n != 1 {
		t.Fatalf("removed %d (%v), want 1", n, err)
	}
	for d, want := range map[string]bool{mine: true, other: true, stale: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", d, err == nil, want)
		}
	}
}
