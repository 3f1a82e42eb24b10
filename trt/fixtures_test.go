package trt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

// The trtexec fixtures live next to the repository, in
// ../shared/fixtures/trtexec relative to the module root, and are never
// copied or edited: tests read them where they are (trtreplay.FixtureDir
// finds them, or skips the test without them unless CI is set).

// fixtureDir returns the fixture directory.
func fixtureDir(tb testing.TB) string {
	tb.Helper()
	return trtreplay.FixtureDir(tb)
}

// fixture returns the path of one fixture file.
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(fixtureDir(tb), name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	return p
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(fixture(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The fixture logs, by what they are.
const (
	fxTRT103      = "trt10.3-resnet50-fp16-rtxa5000-build-bench.log"
	fxTRT86       = "trt8.6.0-resnet50-dynamic-fp16-rtx3060laptop-stdout-only.log"
	fxTRT1016     = "trt10.16-mnist-onnx-defaults-rtx6000ada-warnings.log"
	fxDumpProfile = "trt10.16-mnist-dumpprofile-no-perf-summary.log"
	fxPluginFail  = "trt10.16-addscalar-plugin-not-found-parse-FAILED.log"
	fxTRT82Fail   = "trt8.2-mnist-fp16-gtx1070-FAILED-stdout-only-verbose.log"
	fxTimes       = "trt8.x-resnet50-rtx3090-fp32.exportTimes.json"
	fxProfile     = "trt8.x-resnet50-rtx3090-fp32.exportProfile.json"
	fxLayers8     = "trt8.x-resnet50-rtx3090-fp32.exportLayerInfo.json"
	fxLayers1016  = "trt10.16-mnist.exportLayerInfo.json"
)

// allLogs lists every .log fixture, so that a fixture added later is
// covered by the tests that range over them.
func allLogs(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(fixtureDir(tb))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	if len(out) < 6 {
		tb.Fatalf("found %d fixture logs, want at least 6", len(out))
	}
	return out
}
