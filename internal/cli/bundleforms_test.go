package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// Every command that takes a bundle takes it in each of its forms: a
// directory, a .tar, a .tgz and a .tar.gz (issue 8, item 3: `bundle
// validate X.tgz` failed with "not a directory" for every valid archive
// while submit accepted it).
func TestEveryCommandTakesEveryBundleForm(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := mlpBundle(t) // real reference outputs: the candidates pass
	want := validate(t, dir).Digest
	forms := map[string]string{
		"directory": dir,
		".tar":      bundletest.Archive(t, dir, "b.tar"),
		".tgz":      bundletest.Archive(t, dir, "b.tgz"),
		".tar.gz":   bundletest.Archive(t, dir, "b.tar.gz"),
	}
	for form, path := range forms {
		t.Run(form, func(t *testing.T) {
			t.Run("bundle validate", func(t *testing.T) {
				s := validate(t, path)
				if s.Digest != want || s.Dir != path {
					t.Errorf("validate %s: dir %q, digest %s; want %q and the directory's %s", form, s.Dir, s.Digest, path, want)
				}
				o := producer(t, "bundle", "validate", path)
				o.wantCode(t, cli.ExitOK)
				if !strings.HasPrefix(o.stdout, "bundle "+path+":") {
					t.Errorf("text output does not name %s: %q", path, o.stdout)
				}
			})
			t.Run("bundle merge", func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "merged")
				producer(t, "bundle", "merge", path, path, "--out", out).wantCode(t, cli.ExitOK)
				if s := validate(t, out); len(s.Graphs) != 2 {
					t.Errorf("merged bundle has %d graphs, want 2", len(s.Graphs))
				}
			})
			t.Run("worker tune", func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "result")
				o := worker(t, "tune", path, "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--out", out, "-q")
				o.wantCode(t, cli.ExitOK)
				if _, err := os.Stat(filepath.Join(out, "graphs", "0", "result.json")); err != nil {
					t.Error(err)
				}
			})
			t.Run("submit embedded", func(t *testing.T) {
				store := filepath.Join(t.TempDir(), "store")
				o := producer(t, "submit", path, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
					"--store", "file://"+store)
				o.wantCode(t, cli.ExitOK)
				if !strings.Contains(o.stdout, "done") {
					t.Errorf("submit of a %s did not finish the run:\n%s", form, o)
				}
			})
		})
	}
}
