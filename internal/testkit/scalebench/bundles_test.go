package scalebench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
)

// partBundle writes a one-graph bundle of an MLP in→hidden→in, with
// reference outputs from ONNX Runtime, so that ort: candidates pass.
func partBundle(tb testing.TB, in, hidden int, seed uint64) string {
	tb.Helper()
	dir := tb.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(in, hidden, in).Write(model); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "part")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Ranges: []string{fmt.Sprintf("input:1x%d..8x%d", in, in)}, Samples: 1, Seed: seed, IntHi: 9,
		Reference: ort.New(ort.Options{}), WorkDir: tb.TempDir(),
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// repeatBundle merges n copies of part into one bundle: n graphs named
// "0".."n-1" with the same files (stored once, as blobs are content
// addressed) and each its own work key, since a graph's name is part of
// its declaration. A 2,000-graph bundle takes a few seconds.
func repeatBundle(tb testing.TB, part string, n int, model string) *bundle.Bundle {
	tb.Helper()
	start := time.Now()
	parts := make([]string, n)
	for i := range parts {
		parts[i] = part
	}
	b, err := bundlegen.Merge(parts, filepath.Join(tb.TempDir(), "bundle"), model)
	if err != nil {
		tb.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		tb.Logf("a %d-graph bundle took %v to write", n, d.Round(time.Millisecond))
	}
	return b
}
