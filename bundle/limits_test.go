package bundle_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/shapes"
)

// A bundle whose sizes would make a worker allocate without bound is
// refused by Open, naming the tensor, the axis and the limit (issue 8,
// item 1: a batch max of 2^40 killed every worker that took the task).
func TestOpenRefusesSizesBeyondTheLimits(t *testing.T) {
	explicitBatch := func(max int64) func(*bundle.Manifest) {
		return func(m *bundle.Manifest) {
			m.DynamicShapes = shapes.DynamicShapes{"input": {
				{Name: "N", Min: 1, Max: max, Batch: true}, {Size: bundletest.MLPIn},
			}}
		}
	}
	declaredMax := func(max int64) func(*bundle.Manifest) {
		return func(m *bundle.Manifest) {
			m.Graphs[0].Inputs[0].Max[0] = max
			m.Graphs[0].Outputs[0].Max[0] = max
		}
	}
	tests := []struct {
		name string
		edit func(*bundle.Manifest)
		want []string
	}{
		{"explicit batch max 2^40", explicitBatch(1 << 40), []string{`"input"`, "1099511627776", "limit"}},
		{"explicit batch max 10^15", explicitBatch(1e15), []string{`"input"`, "limit"}},
		{"explicit batch max 2^63-1", explicitBatch(math.MaxInt64), []string{`"input"`, "limit"}},
		{"declared max 10^15", declaredMax(1e15), []string{`"input"`, "axis 0", "limit"}},
		{"declared max 2^63-1", declaredMax(math.MaxInt64), []string{`"input"`, "axis 0", "limit"}},
		// Every dim within MaxDim, but the tensor at the max batch is
		// 2^30 × 4 floats = 16 GiB.
		{"explicit batch 2^30 × 4 floats", explicitBatch(1 << 30), []string{`"input"`, "GiB"}},
		{"model name too long for a store key", func(m *bundle.Manifest) { m.Model = strings.Repeat("m", 3000) },
			[]string{"model", "200 bytes"}},
		{"graph name too long for a store key", func(m *bundle.Manifest) { m.Graphs[0].Name = strings.Repeat("g", 5000) },
			[]string{"name", "200 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			bundletest.EditManifest(t, dir, tc.edit)
			_, err := bundle.Open(dir)
			if err == nil {
				t.Fatal("Open accepted the bundle")
			}
			if !bundle.IsInvalid(err) {
				t.Errorf("error is not an InvalidError: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q: %v", w, err)
				}
			}
		})
	}
}

// ResizeAxis and ResizeBatch check the size they are asked for before
// allocating it: an error, not a panic ("makeslice: cap out of range") or
// a fatal out-of-memory.
func TestResizeRefusesSizesBeyondTheLimits(t *testing.T) {
	x := bundletest.Float32s("input", []int64{1, 4}, 1)
	for _, n := range []int64{1e15, math.MaxInt64, 1 << 40, 1 << 31, bundle.MaxTensorBytes/16 + 1} {
		if _, err := x.ResizeAxis(0, n); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("ResizeAxis(0, %d): err %v, want one naming the limit", n, err)
		}
	}
	decls := []bundle.TensorDecl{{TensorSpec: shapes.TensorSpec{Name: "input", Shape: []shapes.Axis{shapes.BatchAxis(0), shapes.Static(4)}}, DType: bundle.Float32}}
	if _, err := bundle.ResizeBatch([]bundle.Tensor{x}, decls, math.MaxInt); err == nil {
		t.Error("ResizeBatch at batch 2^63-1 succeeded")
	}
	if got, err := x.ResizeAxis(0, 3); err != nil || len(got.Data) != 3*4*4 {
		t.Errorf("ResizeAxis(0, 3): %d bytes, err %v", len(got.Data), err)
	}
}
