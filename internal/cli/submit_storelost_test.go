package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// A run Redis still records, submitted again against a store that lost it
// (emptied, or another one), is refused with what to do, exit 2, and
// nothing is enqueued or written; --force submits a new run. Before, the
// resubmit failed with "read run.json of …: object does not exist", exit 3
// (seen on the GPU check's second run, with the first run's redis-server
// still up).
func TestResubmitToAStoreThatLostTheRun(t *testing.T) {
	url := testsvc.Redis(t)
	dir := t.TempDir()
	store := "file://" + dir
	b := mlpBundle(t)
	args := []string{"submit", b, "--redis", url, "--store", store, "--target", "cpu",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic"}
	producer(t, args...).wantCode(t, cli.ExitOK)

	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	o := producer(t, args...)
	o.wantCode(t, cli.ExitUsage)
	for _, want := range []string{"recorded in Redis but missing from the store", "was the store emptied", "--force", "run.json"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the refused submit wrote %d entries into the store: %v", len(left), left)
	}
	producer(t, append(args, "--force")...).wantCode(t, cli.ExitOK)
}
