package stack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

// ModelBundle makes a bundle of the given fixture models, one graph each,
// with reference outputs from ONNX Runtime (so ort: candidates pass):
// orttest.Bundle with the shape ranges of onnxtest's fixture models, and
// the seed this package's bundles have always had.
func ModelBundle(t testing.TB, model string, models ...*onnxtest.Builder) string {
	t.Helper()
	ranges := map[string][]string{
		"mlp":        {"input:1x64..16x64"},
		"convnet":    {"image:1x3x16x16..8x3x16x16"},
		"two_inputs": {"a:1x8..8x8", "mask:1x8..8x8"},
	}
	parts := make([]orttest.Part, len(models))
	for i, m := range models {
		parts[i] = orttest.Part{Model: m, Shapes: ranges[m.Name()]}
	}
	return orttest.SeededBundle(t, 3, model, parts...)
}

// TRTBundle writes a one-graph bundle for trt: candidates (bundletest's
// MLP) and returns it opened, with its graph's samples.
func TRTBundle(t testing.TB, model string, opts ...bundletest.Option) (*bundle.Bundle, []bundle.Sample) {
	t.Helper()
	b, err := bundle.Open(bundletest.Write(t, append([]bundletest.Option{bundletest.WithModel(model)}, opts...)...))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	return b, samples
}

// WorkingTRT is a trtexec stand-in config of a TensorRT 10.3 trtexec that
// builds, answers the samples' reference outputs and benchmarks.
func WorkingTRT(t testing.TB, b *bundle.Bundle, samples []bundle.Sample) trtreplay.Config {
	return trtreplay.Working(t, trtreplay.GraphOutputs(t, b.Manifest.Graphs[0], b.Manifest.DynamicShapes, samples))
}

// HangingAndWorkingTRT writes two trtexec stand-in configs for a bundle
// with the given samples: hanging's engine build never ends (and writes its
// helper's pid to hangPID once it is there, so a kill lands mid-build by
// construction, not by a sleep racing the build), working's works.
func HangingAndWorkingTRT(t testing.TB, b *bundle.Bundle, samples []bundle.Sample) (hanging, working, hangPID string) {
	t.Helper()
	tmp := t.TempDir()
	hangPID = filepath.Join(tmp, "hang.pid")
	w := WorkingTRT(t, b, samples)
	h := w
	h.Build = trtreplay.Replay{Hang: true, HangPIDFile: hangPID}
	hanging, working = filepath.Join(tmp, "hanging.json"), filepath.Join(tmp, "working.json")
	for p, c := range map[string]trtreplay.Config{hanging: h, working: w} {
		if err := trtreplay.WriteConfigFile(p, c); err != nil {
			t.Fatal(err)
		}
	}
	return hanging, working, hangPID
}

// WaitPIDFile waits until a hanging trtexec stand-in has written its
// helper's pid, and kills the helper when the test ends.
func WaitPIDFile(t testing.TB, path string, limit time.Duration) int {
	t.Helper()
	pid := 0
	Poll(t, limit, "the trtexec stand-in writing "+path, func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0, string(b)
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// Alive tells whether a process is running: not gone and not a zombie
// (which a container's init may never reap).
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: ask the kernel
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
