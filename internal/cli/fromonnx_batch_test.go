package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// --dynamic-batch refuses a graph that is not batch-agnostic, saying how
// it showed: one that keeps batch 1 inside (a Reshape to [1,4]) does not
// run at batch 2; one that mixes the batch (x minus its mean over the
// batch) runs but differs from two batch-1 runs stacked. Nothing is
// written.
func TestDynamicBatchRefusesBatchBoundGraphs(t *testing.T) {
	t.Parallel()
	needORT(t)
	f32 := onnxpb.TensorProto_FLOAT
	for _, tc := range []struct {
		name  string
		model *onnxtest.Builder
		want  string
	}{
		{"reshape", onnxtest.New("fixed", 13).Input("x", f32, 1, 4).Output("y", f32, 1, 4).
			Int64s("shape", []int64{2}, []int64{1, 4}).Node("Reshape", []string{"x", "shape"}, []string{"y"}),
			"it does not run at batch 2"},
		{"mixes", onnxtest.New("mixes", 13).Input("x", f32, 1, 4).Output("y", f32, 1, 4).
			Node("ReduceMean", []string{"x"}, []string{"m"}, onnxtest.IntsAttr("axes", 0)).Node("Sub", []string{"x", "m"}, []string{"y"}),
			`at batch 2 its outputs are not those of two batch-1 runs stacked: output "y"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, "m.onnx")
			if err := tc.model.Write(model); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "bundle")
			producer(t, "bundle", "from-onnx", model, "--out", out, "--dynamic-batch").
				wantError(t, "producer", cli.ExitUsage, "--dynamic-batch: the graph is not batch-agnostic", tc.want, "make the batch dynamic at export instead")
			wantAbsent(t, out)
		})
	}
	// A model whose batch is not fixed at 1 has nothing to make dynamic.
	producer(t, "bundle", "from-onnx", writeMLP(t), "--out", filepath.Join(t.TempDir(), "b"), "--dynamic-batch").
		wantError(t, "producer", cli.ExitUsage, "--dynamic-batch: no input of", "has a batch axis fixed at 1")
}
