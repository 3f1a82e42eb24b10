package cli_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
)

// backdate moves every file of a local store d into the past.
func backdate(t *testing.T, root string, d time.Duration) {
	t.Helper()
	when := time.Now().Add(-d)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func countFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// Two runs of a model and an orphan blob, all ten days old: gc's dry run
// names the older run and the orphan with their bytes and removes nothing;
// --dry-run=false removes them, and the kept state still fetches.
func TestGCDryRunThenSweep(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "store")
	store := "file://" + root
	var runs []string
	for _, seed := range []string{"1", "2"} {
		b := filepath.Join(dir, "bundle"+seed)
		producer(t, "bundle", "from-onnx", writeMLP(t), "--out", b, "--shape", "input:1x64..4x64", "--seed", seed, "--model", "tests.GC").wantCode(t, cli.ExitOK)
		runs = append(runs, submitRun(t, b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
			"--bench-time", benchTime, "--store", store))
	}
	orphan := filepath.Join(root, "blobs", "sha256", strings.Repeat("ab", 32))
	if err := os.WriteFile(orphan, []byte("left by a writer that stopped"), 0o644); err != nil {
		t.Fatal(err)
	}
	backdate(t, root, 10*24*time.Hour)
	files := countFiles(t, root)

	o := producer(t, "gc", "--store", store, "--keep-runs", "1")
	o.wantCode(t, cli.ExitOK)
	for _, w := range []string{"would remove run " + runs[0], "would remove blobs/sha256/" + strings.Repeat("ab", 32) + ": 29 B",
		"would remove 1 runs and", "dry run: nothing removed"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("dry run output does not say %q:\n%s", w, o.stdout)
		}
	}
	if strings.Contains(o.stdout, runs[1]) {
		t.Errorf("dry run would remove the newest run %s:\n%s", runs[1], o.stdout)
	}
	if n := countFiles(t, root); n != files {
		t.Fatalf("dry run changed the store: %d files, were %d", n, files)
	}

	o = producer(t, "gc", "--store", store, "--keep-runs", "1", "--dry-run=false", "-o", "json")
	o.wantCode(t, cli.ExitOK)
	var res struct {
		DryRun       bool  `json:"dry_run"`
		Deleted      int   `json:"deleted"`
		DeletedBytes int64 `json:"deleted_bytes"`
		Bytes        int64 `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
		t.Fatalf("gc -o json: %v\n%s", err, o.stdout)
	}
	if res.DryRun || res.Deleted == 0 || res.DeletedBytes != res.Bytes || files-countFiles(t, root) != res.Deleted {
		t.Errorf("gc result %+v; %d of %d files left", res, countFiles(t, root), files)
	}
	if _, err := os.Stat(filepath.Join(root, "runs", runs[0])); !os.IsNotExist(err) {
		t.Errorf("run %s is still there: %v", runs[0], err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan is still there: %v", err)
	}
	producer(t, "fetch", "tests.GC", "--platform", "cpu", "--store", store, "--out", filepath.Join(dir, "deploy")).wantCode(t, cli.ExitOK)
	// Nothing left to do.
	o = producer(t, "gc", "--store", store, "--keep-runs", "1")
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "would remove 0 runs and 0 unreferenced blobs: 0 B") {
		t.Errorf("second gc:\n%s", o.stdout)
	}
}

func TestGCBadInput(t *testing.T) {
	t.Parallel()
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep-runs", "-1"}, "--keep-runs -1: want 0 or more"},
		{[]string{"--older-than", "soon"}, `--older-than "soon": want a duration such as 720h or 30d`},
		{[]string{"--older-than", "-3d"}, `--older-than "-3d"`},
		{[]string{"--grace", "1s"}, "--grace 1s: want at least 1m"},
		{[]string{"-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"extra"}, "unknown command"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			args := append([]string{"gc", "--store", store}, tc.args...)
			producer(t, args...).wantError(t, "producer", cli.ExitUsage, tc.want)
		})
	}
	producer(t, "gc", "--store", "file://"+filepath.Join(t.TempDir(), "missing")).wantError(t, "producer", cli.ExitUsage, "no store at")
}
