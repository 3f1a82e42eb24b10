package orttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/ort"
)

// Main is the body of such a package's TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to do after the tests: it
// returns m.Run's exit code instead of exiting.
func Run(m *testing.M) int {
	// The ONNX Runtime backend runs sessions in a child process that is
	// this test binary: it must serve as the child when started as one.
	ort.MaybeServeChild()
	// Under -race every process sleeps a second at exit (atexit_sleep_ms),
	// and closing an engine waits for its session child to exit: without
	// this, each engine costs the tests a second.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	// A nightly keeps its files' digests in the user's cache directory:
	// the tests' nightlies keep theirs in a directory of their own.
	if _, ok := os.LookupEnv("TUNEFLEET_DIGEST_CACHE"); !ok {
		if dir, err := os.MkdirTemp("", "tunefleet-digests-"); err == nil {
			os.Setenv("TUNEFLEET_DIGEST_CACHE", filepath.Join(dir, "digests.json"))
			defer os.RemoveAll(dir)
		}
	}
	return m.Run()
}

// Need skips a test that runs ONNX Runtime under -short or when the library
// is absent locally; with CI set, a missing library fails the test so that
// a broken fetch cannot pass as skipped tests.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that runs ONNX Runtime")
	}
	if _, err := ort.FindLibrary(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %v", err)
		}
		t.Skip(err)
	}
}
