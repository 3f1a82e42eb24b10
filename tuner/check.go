package tuner

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// check runs every sample against its reference outputs (counting them in
// cr.CheckedAt), then the graph's batch bounds.
// Each sample's verdict, with the largest absolute error per output, goes
// to the engine's build log, so that the log says why a candidate passed
// or failed.
func (t *graphTuner) check(ctx context.Context, eng backend.Engine, cr *backend.CandidateResult) error {
	for _, s := range t.samples {
		got, err := eng.Run(ctx, s.Inputs, backend.OutputSpecsLike(s.Outputs))
		if err == nil {
			err = backend.Check(got, s.Outputs, t.g.Tolerances)
			appendLog(eng, "tunefleet: check sample %s: %s; max abs error per output: %s", s.Dir, verdict(err), maxErrors(got, s.Outputs))
		} else {
			appendLog(eng, "tunefleet: check sample %s: run failed: %v", s.Dir, err)
		}
		if err != nil {
			return fmt.Errorf("sample %s: %w", s.Dir, err)
		}
		cr.CheckedAt++
	}
	err := t.checkBounds(ctx, eng)
	appendLog(eng, "tunefleet: check of %s: %s on %d sample(s)", cr.Candidate, verdict(err), cr.CheckedAt)
	return err
}

func verdict(err error) string {
	if err != nil {
		return "FAILED: " + err.Error()
	}
	return "passed"
}

func maxErrors(got, want []bundle.Tensor) string {
	errs := backend.MaxAbsErrors(got, want)
	parts := make([]string, len(want))
	for i, w := range want {
		e := errs[i]
		if e == "" {
			e = "n/a"
		}
		parts[i] = fmt.Sprintf("%q=%s", w.Name, e)
	}
	return strings.Join(parts, ", ")
}

// appendLog adds one line to the engine's build log (its "log" artifact),
// if it has one. The backend's own writers append too (O_APPEND), so the
// lines interleave whole rather than overwrite each other. A log that
// cannot be written is not a reason to fail the candidate.
func appendLog(eng backend.Engine, format string, args ...any) {
	for _, a := range eng.Artifacts() {
		if a.Role != backend.RoleLog {
			continue
		}
		f, err := os.OpenFile(a.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return
		}
		fmt.Fprintf(f, format+"\n", args...)
		f.Close()
		return
	}
}

// checkBounds runs the first sample at the graph's smallest and largest
// declared batch, as AITune's correctness check runs its min and max shapes
// (it has no reference outputs there either): the engine must run, give
// outputs of the expected shapes, and finite values where the reference is
// finite. A batch size a recorded sample has was checked against its
// reference outputs already.
func (t *graphTuner) checkBounds(ctx context.Context, eng backend.Engine) error {
	specs := bundle.Specs(t.g.Inputs)
	if !shapes.AnyBatchAxis(specs) || len(t.samples) == 0 {
		return nil
	}
	lo, hi := shapes.MinBatchSize(specs, t.explicit), shapes.MaxBatchSize(specs, t.explicit)
	recorded := map[int]bool{}
	for _, s := range t.samples {
		recorded[t.batchOf(s)] = true
	}
	base := t.samples[0]
	for _, bound := range []struct {
		bs   int
		name string
	}{{lo, "min"}, {hi, "max"}} {
		if recorded[bound.bs] || bound.name == "max" && hi == lo {
			continue
		}
		ins, outs, err := t.batch(base, bound.bs)
		if err != nil {
			return err
		}
		got, err := eng.Run(ctx, ins, outs)
		if err == nil {
			err = plausible(got, outs, base.Outputs)
		}
		if err != nil {
			return fmt.Errorf("at batch %d, the graph's declared %s: %w", bound.bs, bound.name, err)
		}
	}
	return nil
}

// batchOf is a sample's batch size: its first input's first batch axis.
func (t *graphTuner) batchOf(s bundle.Sample) int {
	for i, in := range t.g.Inputs {
		if axes := in.BatchAxes(); len(axes) > 0 && i < len(s.Inputs) && axes[0] < len(s.Inputs[i].Shape) {
			return int(s.Inputs[i].Shape[axes[0]])
		}
	}
	return 0
}

// plausible checks outputs that have no reference: the shapes that can be
// told in advance, and no NaN or Inf where the recorded reference (at
// another batch) has none.
func plausible(got []bundle.Tensor, want []backend.OutputSpec, ref []bundle.Tensor) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	for i, g := range got {
		if want[i].Shape != nil && !slices.Equal(g.Shape, want[i].Shape) {
			return fmt.Errorf("output %q has shape %v, want %v", want[i].Name, g.Shape, want[i].Shape)
		}
		if !g.DType.IsFloat() || i >= len(ref) || !finite(ref[i]) {
			continue
		}
		if !finite(g) {
			return fmt.Errorf("output %q has NaN or Inf values, where the recorded reference has none", want[i].Name)
		}
	}
	return nil
}

func finite(t bundle.Tensor) bool {
	if !t.DType.IsFloat() {
		return true
	}
	for i := range t.Len() {
		if v := t.Float64At(i); math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
