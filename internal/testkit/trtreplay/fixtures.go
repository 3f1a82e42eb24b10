package trtreplay

import (
	"os"
	"path/filepath"
	"testing"
)

// The trtexec fixtures live next to the repository, in
// ../shared/fixtures/trtexec relative to the module root, and are never
// copied or edited: tests read them where they are.

// Fixture logs and exports the stand-in replays, by what they are (see
// SOURCES.md in the fixture directory).
const (
	// TensorRT 10.3 on an RTX A5000: a passed fp16 build and benchmark.
	LogTRT103 = "trt10.3-resnet50-fp16-rtxa5000-build-bench.log"
	// TensorRT 10.16: --dumpProfile output without a performance summary.
	LogDumpProfile = "trt10.16-mnist-dumpprofile-no-perf-summary.log"
	// TensorRT 10.16: parsing fails, no plugin for the AddScalar op; exit 1.
	LogPluginNotFound = "trt10.16-addscalar-plugin-not-found-parse-FAILED.log"
	// An --exportTimes trace (RTX 3090, fp32).
	TimesRTX3090 = "trt8.x-resnet50-rtx3090-fp32.exportTimes.json"
	// An --exportLayerInfo file of TensorRT 10.16.
	LayersTRT1016 = "trt10.16-mnist.exportLayerInfo.json"
)

// FixtureDir returns the trtexec fixture directory, found from the working
// directory's module root, skipping the test when it is absent, unless CI
// is set, where its absence is a failure.
func FixtureDir(tb testing.TB) string {
	tb.Helper()
	// CI may keep shared/ elsewhere than beside the checkout.
	if d := os.Getenv("TUNEFLEET_SHARED_DIR"); d != "" {
		fx := filepath.Join(d, "fixtures", "trtexec")
		if st, err := os.Stat(fx); err == nil && st.IsDir() {
			return fx
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			fx := filepath.Join(dir, "..", "shared", "fixtures", "trtexec")
			if st, err := os.Stat(fx); err == nil && st.IsDir() {
				return fx
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("trtexec fixtures not found (../shared/fixtures/trtexec next to the module root)")
	}
	tb.Skip("trtexec fixtures not found (../shared/fixtures/trtexec next to the module root)")
	return ""
}

// Fixture returns the path of one fixture file.
func Fixture(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(FixtureDir(tb), name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("fixture %s: %v", name, err)
	}
	return p
}

// ReadFixture returns one fixture file's content.
func ReadFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Fixture(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
