package deploycheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the module root: the build context of the images and the
// directory of docker-compose.yml.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

// wantClean fails on every error.
func wantClean(t testing.TB, errs []error) {
	t.Helper()
	for _, e := range errs {
		t.Error(e)
	}
}

// wantOneOf fails unless some error contains every want.
func wantOneOf(t testing.TB, errs []error, want ...string) {
	t.Helper()
	for _, e := range errs {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(e.Error(), w)
		}
		if ok {
			t.Logf("refused as wanted: %v", e)
			return
		}
	}
	t.Errorf("no error contains %q; got:\n%v", want, errors.Join(errs...))
}

// mutate returns src with old replaced once; the test fails if old is not
// in it, so a mutation never silently tests the unmutated file.
func mutate(t testing.TB, src, old, new string) string {
	t.Helper()
	if !strings.Contains(src, old) {
		t.Fatalf("mutation: %q not found", old)
	}
	return strings.Replace(src, old, new, 1)
}
