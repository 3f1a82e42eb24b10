package maxbatch_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/shapes"
)

// Search stops where AITune's ThroughputSaturatedProfilingStopStrategy
// stops (5 % gain, back-off 2: the third size in a row under the gain),
// at a size beyond the limits, or at a size that fails (keeping what came
// before), and picks the first size of the highest throughput.
func TestSearch(t *testing.T) {
	sizes := []int{1, 2, 4, 8, 16, 32, 64, 128}
	for _, tc := range []struct {
		name     string
		tput     map[int]float64 // samples/s per size; absent: the run fails
		limit    int             // sizes above it do not fit (0: none)
		measured []int
		best     int
		stop     string
		err      bool
	}{
		{name: "saturates after back-off", tput: map[int]float64{1: 100, 2: 200, 4: 400, 8: 410, 16: 405, 32: 420, 64: 999, 128: 1}, measured: []int{1, 2, 4, 8, 16, 32}, best: 32, stop: "saturated at batch 32"},
		{name: "a gain resets the back-off", tput: map[int]float64{1: 100, 2: 101, 4: 102, 8: 200, 16: 201, 32: 202, 64: 203, 128: 1}, measured: []int{1, 2, 4, 8, 16, 32, 64}, best: 64, stop: "saturated at batch 64"},
		{name: "still growing at the end", tput: map[int]float64{1: 1, 2: 2, 4: 4, 8: 8, 16: 16, 32: 32, 64: 64, 128: 128}, measured: sizes, best: 128, stop: "last batch size"},
		{name: "ties keep the first", tput: map[int]float64{1: 100, 2: 300, 4: 300, 8: 300, 16: 300}, measured: []int{1, 2, 4, 8, 16}, best: 2, stop: "saturated"},
		{name: "a failing size ends it", tput: map[int]float64{1: 100, 2: 200, 4: 400}, measured: []int{1, 2, 4}, best: 4, stop: "batch 8 failed to run"},
		{name: "beyond the limits", tput: map[int]float64{1: 1, 2: 2, 4: 4, 8: 8, 16: 16}, limit: 4, measured: []int{1, 2, 4}, best: 4, stop: "batch 8 is beyond the bundle's limits"},
		{name: "the first size fails", tput: map[int]float64{}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var measured []int
			points, best, stop, err := maxbatch.Search(context.Background(), sizes,
				func(bs int) error {
					if tc.limit > 0 && bs > tc.limit {
						return errors.New("too large")
					}
					return nil
				},
				func(_ context.Context, bs int) (backend.Stats, error) {
					tp, ok := tc.tput[bs]
					if !ok {
						return backend.Stats{}, errors.New("out of memory")
					}
					measured = append(measured, bs)
					return backend.Stats{BatchSize: bs, Throughput: tp, EstimateMs: float64(bs) * 1000 / tp}, nil
				})
			if tc.err {
				if err == nil {
					t.Fatalf("points %v: want an error", points)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(measured, tc.measured) || len(points) != len(measured) || best != tc.best || !strings.Contains(stop, tc.stop) {
				t.Errorf("measured %v best %d stop %q, want %v, %d, %q", measured, best, stop, tc.measured, tc.best, tc.stop)
			}
		})
	}
}

// Extend is update_max_batch_size: batch axes only ever widen to bs,
// every other axis and an input without a batch axis stay as recorded.
func TestExtend(t *testing.T) {
	x := bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis("x", []int64{2, 3, 8}, []int64{8, 9, 8}, 0), DType: bundle.Float32}
	state := bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis("state", []int64{2, 2, 64}, []int64{2, 8, 64}, 1), DType: bundle.Float32}
	scale := bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis("scale", []int64{1}, []int64{1}, shapes.NoBatchAxis), DType: bundle.Float32}
	decls := []bundle.TensorDecl{x, state, scale}
	for _, tc := range []struct {
		bs       int
		min, max [][]int64
	}{
		{bs: 64, min: [][]int64{{2, 3, 8}, {2, 2, 64}, {1}}, max: [][]int64{{64, 9, 8}, {2, 64, 64}, {1}}},
		{bs: 4, min: [][]int64{{2, 3, 8}, {2, 2, 64}, {1}}, max: [][]int64{{8, 9, 8}, {2, 8, 64}, {1}}},
		{bs: 1, min: [][]int64{{1, 3, 8}, {2, 1, 64}, {1}}, max: [][]int64{{8, 9, 8}, {2, 8, 64}, {1}}},
	} {
		got := maxbatch.Extend(decls, tc.bs)
		for i, d := range got {
			if !slices.Equal(d.Min, tc.min[i]) || !slices.Equal(d.Max, tc.max[i]) {
				t.Errorf("bs %d: %s min %v max %v, want %v %v", tc.bs, d.Name, d.Min, d.Max, tc.min[i], tc.max[i])
			}
		}
	}
	if !slices.Equal(x.Max, []int64{8, 9, 8}) {
		t.Errorf("Extend changed its input: %v", x.Max)
	}
}

// Fits holds the search to the limits a bundle's declared range is held
// to: 4 GiB per tensor, 16 GiB for the inputs and outputs together.
func TestFits(t *testing.T) {
	decl := func(name string) bundle.TensorDecl {
		return bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis(name, []int64{1, 1024}, []int64{8, 1024}, 0), DType: bundle.Float32}
	}
	tensor := func(name string) bundle.Tensor {
		return bundle.Tensor{Name: name, DType: bundle.Float32, Shape: []int64{2, 1024}}
	}
	g := bundle.Graph{Inputs: []bundle.TensorDecl{decl("a"), decl("b")}, Outputs: []bundle.TensorDecl{decl("y"), decl("z")}}
	s := bundle.Sample{Inputs: []bundle.Tensor{tensor("a"), tensor("b")}, Outputs: []bundle.Tensor{tensor("y"), tensor("z")}}
	for _, tc := range []struct {
		bs   int
		want string // "" fits
	}{
		{1 << 18, ""},                 // 1 GiB each, 4 GiB together
		{1 << 20, ""},                 // 4 GiB each (the limit), 16 GiB together (the limit)
		{1<<20 + 1, "MaxTensorBytes"}, // one row over 4 GiB
		{1 << 21, "MaxTensorBytes"},
	} {
		err := maxbatch.Fits(g, s, 2, tc.bs)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("batch %d: %v, want %q", tc.bs, err, tc.want)
		}
	}
	g.Inputs = append(g.Inputs, decl("c"))
	s.Inputs = append(s.Inputs, tensor("c"))
	if err := maxbatch.Fits(g, s, 2, 1<<20); err == nil || !strings.Contains(err.Error(), "MaxBatchBytes") {
		t.Errorf("five tensors of 4 GiB: %v, want MaxBatchBytes", err)
	}
}
