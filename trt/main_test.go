package trt_test

import (
	"os"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

// TestMain lets this test binary act as trtexec: the stand-in of
// internal/testkit/trtreplay, which replays fixture logs for tests and is never
// TensorRT.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(trtreplay.Env); cfg != "" {
		os.Exit(trtreplay.Main(cfg, os.Args[1:]))
	}
	// Under -race every process sleeps a second at exit (atexit_sleep_ms):
	// without this, each trtexec invocation costs the tests a second.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}
