package maxbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// NeutralCandidate is the engine the batch sizes are measured on: ONNX
// Runtime running the graph as exported, every optimization off (what
// `bundle from-onnx` computes reference outputs with), the nearest thing
// to AITune's TorchEager.
const NeutralCandidate = "ort:cpu:disabled"

// StopRule is how one batch size is measured: AITune's
// NumStepsMeasuringStopStrategy (10 warm-up calls, then 20 timed), in one
// round, bounded in time by the run's own measurement time.
func StopRule(run backend.StopRule) backend.StopRule {
	return backend.StopRule{Warmup: 10, WarmupTime: run.WarmupLimit(), Window: 20, MaxCV: run.MaxCV,
		MinSamples: 20, MaxSamples: 20, MaxTime: run.MaxTime, Rounds: 1, MinCalls: 5}
}

// Point is one measured batch size.
type Point struct {
	BatchSize  int     `json:"batch_size"`
	Throughput float64 `json:"throughput"` // samples/s
	EstimateMs float64 `json:"estimate_ms"`
}

// Report is what the step did, as result.json records it.
type Report struct {
	Engine string `json:"engine"` // NeutralCandidate
	// RecordedMax is the graph's max batch as recorded (declared).
	RecordedMax int `json:"recorded_max_batch"`
	// Found is the batch size of the highest throughput.
	Found int `json:"found_max_batch"`
	// Extended: Found is above RecordedMax, so the graph's max batch was
	// raised to it (AITune only ever extends).
	Extended bool    `json:"extended"`
	Points   []Point `json:"points,omitempty"`
	// Stop says why the sweep ended: saturated, a limit, a failure, or
	// the last size.
	Stop string `json:"stop,omitempty"`
	// Skipped says why the step did not run (the graph has no batch axis).
	Skipped  string        `json:"skipped,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Sizes are the batch sizes to try: the candidates (AITune's 1, 2, 4, …,
// 2^20 by default) from the graph's smallest batch on. AITune starts at 1,
// and a max-throughput batch below the recorded min would lower the min
// too; an engine here is never asked for less than the recorded min.
func Sizes(candidates []int, minBS int) []int {
	var out []int
	for _, b := range candidates {
		if b >= minBS && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// Measure times one batch size on the neutral engine.
type Measure func(ctx context.Context, bs int) (backend.Stats, error)

// Search measures the sizes in order until throughput saturates
// (backend.DefaultSweepRule: AITune's ThroughputSaturatedProfilingStopStrategy,
// a 5 % gain, two sizes of back-off), a size does not fit the bundle's
// limits (fits says why), or a size fails to run: AITune stops at the
// first batch size whose measurement raises (out of memory, most often)
// and keeps what it measured before. best is the batch size of the
// highest throughput, the first of equals (AITune sorts stably). An error
// is returned when not even the first size could be measured, or ctx ended.
func Search(ctx context.Context, sizes []int, fits func(bs int) error, measure Measure) (points []Point, best int, stop string, err error) {
	if len(sizes) == 0 {
		return nil, 0, "", errors.New("no batch size to try")
	}
	sweep := backend.NewSweepState(backend.DefaultSweepRule())
	stop = fmt.Sprintf("reached the last batch size, %d", sizes[len(sizes)-1])
	for _, bs := range sizes {
		if err := fits(bs); err != nil {
			stop = fmt.Sprintf("batch %d is beyond the bundle's limits: %v", bs, err)
			break
		}
		st, merr := measure(ctx, bs)
		if cerr := ctx.Err(); cerr != nil {
			return points, 0, "", cerr
		}
		if merr != nil {
			if len(points) == 0 {
				return nil, 0, "", fmt.Errorf("batch %d: %w", bs, merr)
			}
			stop = fmt.Sprintf("batch %d failed to run: %v", bs, firstLine(merr.Error()))
			break
		}
		points = append(points, Point{BatchSize: bs, Throughput: st.Throughput, EstimateMs: st.EstimateMs})
		if sweep.Add(st) {
			stop = fmt.Sprintf("throughput saturated at batch %d (under %.0f %% gain for %d sizes in a row)", bs, 100*backend.DefaultSweepRule().MinGain, backend.DefaultSweepRule().BackoffLimit+1)
			break
		}
	}
	if len(points) == 0 {
		return nil, 0, "", errors.New(stop)
	}
	top := points[0]
	for _, p := range points[1:] {
		if p.Throughput > top.Throughput {
			top = p
		}
	}
	return points, top.BatchSize, stop, nil
}

// Extend is AITune's GraphSpec.update_max_batch_size for the recorded
// inputs: every batch axis of every input gets max(max, bs) as its max
// (and min(min, bs) as its min); static and other dynamic axes, inputs
// without a batch axis and the outputs are left alone (AITune updates the
// input spec only). A batch axis is sized bs, as tunefleet's sweep sizes
// every batch axis (a multiplier of 1, AITune's for an axis that tracks
// the batch one for one). An opt shape a bundle declares is kept.
func Extend(decls []bundle.TensorDecl, bs int) []bundle.TensorDecl {
	out := make([]bundle.TensorDecl, len(decls))
	for i, d := range decls {
		d.Min, d.Max = slices.Clone(d.Min), slices.Clone(d.Max)
		d.Opt = slices.Clone(d.Opt)
		d.Shape = slices.Clone(d.Shape)
		for _, ax := range d.BatchAxes() {
			if ax < len(d.Max) {
				d.Max[ax] = max(d.Max[ax], int64(bs))
				d.Min[ax] = min(d.Min[ax], int64(bs))
			}
		}
		out[i] = d
	}
	return out
}

// Fits checks that the graph's inputs at batch bs, and its outputs scaled
// from the sample's batch sampleBS, stay within bundle.MaxTensorBytes each
// and bundle.MaxBatchBytes together: the limits a bundle's own declared
// max is held to, so that the search never asks for more than a declared
// range could.
func Fits(g bundle.Graph, s bundle.Sample, sampleBS, bs int) error {
	var total int64
	add := func(kind string, d bundle.TensorDecl, shape []int64) error {
		n := int64(d.DType.Size())
		for _, v := range shape {
			if v > 0 && n > bundle.MaxTensorBytes/v {
				return fmt.Errorf("%s %q at %s holds more than bundle.MaxTensorBytes (%d bytes)", kind, d.Name, shapes.FormatShape(shape), bundle.MaxTensorBytes)
			}
			n *= v
		}
		total += n
		return nil
	}
	for i, d := range g.Inputs {
		if i >= len(s.Inputs) {
			break
		}
		shape := slices.Clone(s.Inputs[i].Shape)
		for _, ax := range d.BatchAxes() {
			if ax < len(shape) {
				shape[ax] = int64(bs)
			}
		}
		if err := add("input", d, shape); err != nil {
			return err
		}
	}
	for i, d := range g.Outputs {
		if i >= len(s.Outputs) {
			break
		}
		shape := slices.Clone(s.Outputs[i].Shape)
		for _, ax := range d.BatchAxes() {
			if ax < len(shape) && sampleBS > 0 {
				shape[ax] = (shape[ax]*int64(bs) + int64(sampleBS) - 1) / int64(sampleBS)
			}
		}
		if err := add("output", d, shape); err != nil {
			return err
		}
	}
	if total > bundle.MaxBatchBytes {
		return fmt.Errorf("inputs and outputs together hold %d bytes, more than bundle.MaxBatchBytes (%d)", total, bundle.MaxBatchBytes)
	}
	return nil
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
