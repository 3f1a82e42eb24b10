package jobs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A killed worker's scratch directories are removed by the next worker on
// the same work directory; a live worker's, and other files, are kept.
func TestRemoveStaleScratch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mine, err := newScratch(dir)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, scratchPrefix+strconv.Itoa(dead.Process.Pid)+"-123")
	other := filepath.Join(dir, "tunefleet-task-notapid")
	for _, d := range []string{stale, other} {
		if err := os.MkdirAll(filepath.Join(d, "bundle"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := removeStaleScratch(dir)
	if err != nil || n != 1 {
		t.Fatalf("removed %d (%v), want 1", n, err)
	}
	for d, want := range map[string]bool{mine: true, other: true, stale: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", d, err == nil, want)
		}
	}
}
