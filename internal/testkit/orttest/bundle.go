package orttest

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
)

// Part is one graph spec of a bundle Bundle makes: a generated model and
// its inputs' shape ranges (as `producer bundle from-onnx --shape` takes).
type Part struct {
	Model  *onnxtest.Builder
	Shapes []string
}

// Bundle writes a bundle of model with one graph spec per part, each with
// two samples (seed 1) and reference outputs from ONNX Runtime, as
// `producer bundle from-onnx` and `bundle merge` make it, and returns its
// directory. It needs ONNX Runtime (Need).
func Bundle(tb testing.TB, model string, parts ...Part) string {
	tb.Helper()
	return SeededBundle(tb, 1, model, parts...)
}

// SeededBundle is Bundle with the samples' random inputs drawn from seed.
func SeededBundle(tb testing.TB, seed uint64, model string, parts ...Part) string {
	tb.Helper()
	Need(tb)
	dir := tb.TempDir()
	var dirs []string
	for i, p := range parts {
		file := filepath.Join(dir, p.Model.Name()+".onnx")
		if err := p.Model.Write(file); err != nil {
			tb.Fatal(err)
		}
		out := filepath.Join(dir, "part"+strconv.Itoa(i))
		if _, err := bundlegen.FromONNX(context.Background(), file, out, bundlegen.ONNXOptions{
			Ranges: p.Shapes, Samples: 2, Seed: seed, IntHi: 9, Reference: ort.New(ort.Options{}), WorkDir: tb.TempDir(),
		}); err != nil {
			tb.Fatal(err)
		}
		dirs = append(dirs, out)
	}
	merged := filepath.Join(dir, "bundle")
	if _, err := bundlegen.Merge(dirs, merged, model); err != nil {
		tb.Fatal(err)
	}
	return merged
}
