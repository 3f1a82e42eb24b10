package graphcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// Candidate is the ONNX Runtime configuration graphs are checked with:
// every graph optimization off, the closest thing to the exported graph
// (a fused kernel must not hide or cause a difference).
const Candidate = "ort:cpu:disabled"

// Options say how to check.
type Options struct {
	// Backend runs the graphs (ort.New(...)); it must accept Candidate.
	Backend backend.Backend
	// FirstOnly checks each graph's first sample only (the cheap check
	// before a submit); otherwise every sample is checked.
	FirstOnly bool
	// Graphs limits the check to these graph names; empty means all.
	Graphs []string
}

// Report is the verdict on a bundle.
type Report struct {
	Bundle string        `json:"bundle"`
	Model  string        `json:"model"`
	OK     bool          `json:"ok"`
	Graphs []GraphReport `json:"graphs"`
}

// GraphReport is the verdict on one graph.
type GraphReport struct {
	Graph string `json:"graph"`
	OK    bool   `json:"ok"`
	// Error is set when the graph could not be loaded at all (no samples
	// were run); Cause explains it.
	Error   string         `json:"error,omitempty"`
	Cause   string         `json:"cause,omitempty"`
	Samples []SampleReport `json:"samples"`
	// Diffs say, per output, how far the graph's outputs are from the
	// references at worst over the samples that ran, beside the tolerance
	// the check allows: how much room a graph that passes has left.
	Diffs []OutputDiff `json:"diffs,omitempty"`
}

// OutputDiff is the largest absolute difference of one output from its
// references over a graph's samples, and its tolerance.
type OutputDiff struct {
	Output string `json:"output"`
	// MaxAbsDiff is the largest |got - want|; null when it is not a
	// finite number: a non-finite value that differs (NonFinite), or an
	// output that cannot be compared element by element (a shape or dtype
	// that differs, integers that differ), which the sample's verdict
	// names.
	MaxAbsDiff *float64 `json:"max_abs_diff"`
	NonFinite  bool     `json:"non_finite,omitempty"`
	// Sample is where the largest difference is (bundle-relative).
	Sample string `json:"sample,omitempty"`
	// ATol and RTol are what the check allows: |got - want| ≤ atol +
	// rtol·|want| (0 and 0 for integers and bools: exact).
	ATol float64 `json:"atol"`
	RTol float64 `json:"rtol"`
}

// SampleReport is the verdict on one recorded sample of a graph.
type SampleReport struct {
	Sample string `json:"sample"` // bundle-relative directory
	Index  int    `json:"index"`
	OK     bool   `json:"ok"`
	// Error is ONNX Runtime's error when the graph did not run on the
	// sample's inputs.
	Error string `json:"error,omitempty"`
	// Outputs are the outputs that disagree with the reference, worst
	// first within backend.Check's ordering of each.
	Outputs []OutputReport `json:"outputs,omitempty"`
	// Cause is the likely cause of a failure, in words a user can act on.
	Cause string `json:"cause,omitempty"`
}

// OutputReport is one output that disagrees with its reference.
type OutputReport struct {
	Output  string `json:"output"`
	Message string `json:"message"`
}

// Bundle checks every graph of b (or those o.Graphs names). The error is
// for what stopped the check itself (the machine: no ONNX Runtime library,
// a disk error, a sample that cannot be read); a graph that fails its
// check is a verdict in the report, and Err turns a failing report into
// the error to show.
func Bundle(ctx context.Context, b *bundle.Bundle, o Options) (Report, error) {
	r := Report{Bundle: b.Dir, Model: b.Manifest.Model, OK: true}
	cand, err := backend.ParseCandidate(Candidate)
	if err != nil {
		return r, err
	}
	for _, g := range b.Manifest.Graphs {
		if len(o.Graphs) > 0 && !contains(o.Graphs, g.Name) {
			continue
		}
		gr, err := checkGraph(ctx, b, g, cand, o)
		if err != nil {
			return r, err
		}
		r.OK = r.OK && gr.OK
		r.Graphs = append(r.Graphs, gr)
	}
	for _, name := range o.Graphs {
		if _, ok := b.Manifest.Graph(name); !ok {
			return r, &UsageError{fmt.Errorf("bundle %s has no graph %q (graphs: %s)", b.Dir, name, strings.Join(graphNames(b), ", "))}
		}
	}
	return r, nil
}

// UsageError marks an error that is the caller's input (a graph name that
// is not in the bundle), not the machine.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func checkGraph(ctx context.Context, b *bundle.Bundle, g bundle.Graph, cand backend.Candidate, o Options) (GraphReport, error) {
	gr := GraphReport{Graph: g.Name, OK: true}
	samples, err := b.Samples(g.Name)
	if err != nil {
		return gr, fmt.Errorf("graph %q: %w", g.Name, err)
	}
	if o.FirstOnly && len(samples) > 1 {
		samples = samples[:1]
	}
	onnxPath, err := bundle.Resolve(b.Dir, g.ONNX)
	if err != nil {
		return gr, fmt.Errorf("graph %q: %w", g.Name, err)
	}
	if onnxPath, err = filepath.Abs(onnxPath); err != nil {
		return gr, err
	}
	work, err := os.MkdirTemp("", "tunefleet-graphcheck-")
	if err != nil {
		return gr, fmt.Errorf("graph %q: scratch directory: %w", g.Name, err)
	}
	defer os.RemoveAll(work)
	eng, err := o.Backend.Build(ctx, backend.BuildRequest{Model: b.Manifest.Model, Graph: g, ONNXPath: onnxPath, Candidate: cand, WorkDir: work})
	if err != nil {
		if backend.ClassOf(err, backend.FailBuild) == backend.FailInfrastructure || ctx.Err() != nil {
			return gr, fmt.Errorf("graph %q: %w", g.Name, err)
		}
		gr.OK = false
		gr.Error = err.Error()
		gr.Cause = "ONNX Runtime cannot load the exported graph (an operator or opset it does not support, or a malformed export); the graph cannot run on any worker"
		return gr, nil
	}
	defer eng.Close()
	passed := 0
	for k, s := range samples {
		sr := SampleReport{Sample: s.Dir, Index: k, OK: true}
		got, err := eng.Run(ctx, s.Inputs, outputSpecs(s.Outputs))
		switch {
		case err != nil && (backend.ClassOf(err, backend.FailRuntime) == backend.FailInfrastructure || ctx.Err() != nil):
			return gr, fmt.Errorf("graph %q sample %s: %w", g.Name, s.Dir, err)
		case err != nil:
			sr.OK = false
			sr.Error = ortMessage(runMessage(err))
			sr.Cause = runCause(sr.Error) + inputsVs(g, s, samples, k)
		default:
			for i := range s.Outputs {
				if i >= len(got) {
					break
				}
				gr.noteDiff(i, &got[i], &s.Outputs[i], s.Dir, g.Tolerances)
				if cerr := backend.Check(got[i:i+1], s.Outputs[i:i+1], g.Tolerances); cerr != nil {
					var f *backend.Failure
					if !errors.As(cerr, &f) {
						return gr, fmt.Errorf("graph %q sample %s: %w", g.Name, s.Dir, cerr)
					}
					sr.Outputs = append(sr.Outputs, OutputReport{Output: s.Outputs[i].Name, Message: failMessage(cerr)})
				}
			}
			if len(got) != len(s.Outputs) {
				sr.Outputs = append(sr.Outputs, OutputReport{Message: fmt.Sprintf("the graph returned %d outputs, the recording has %d", len(got), len(s.Outputs))})
			}
			if len(sr.Outputs) > 0 {
				sr.OK = false
			}
		}
		if sr.OK {
			passed++
		}
		gr.OK = gr.OK && sr.OK
		gr.Samples = append(gr.Samples, sr)
	}
	// Causes of wrong outputs depend on whether other samples passed: a
	// graph right on one call and wrong on another has something of one
	// call traced into it.
	for i := range gr.Samples {
		sr := &gr.Samples[i]
		if !sr.OK && sr.Error == "" {
			sr.Cause = mismatchCause(sr.Outputs, passed > 0)
		}
	}
	return gr, nil
}

// noteDiff folds output i of one sample into the graph's worst
// differences.
func (gr *GraphReport) noteDiff(i int, got, want *bundle.Tensor, sample string, tol map[string]bundle.Tolerance) {
	for len(gr.Diffs) <= i {
		gr.Diffs = append(gr.Diffs, OutputDiff{})
	}
	od := &gr.Diffs[i]
	if od.Output == "" {
		od.Output = want.Name
		od.ATol, od.RTol = backend.Tolerance(want, tol)
		zero := 0.0
		od.MaxAbsDiff = &zero // until a sample says otherwise
	}
	if od.MaxAbsDiff == nil {
		return // already incomparable or non-finite: nothing is worse
	}
	d, ok := backend.MaxAbsError(got, want)
	switch {
	case !ok || math.IsInf(d, 0):
		od.MaxAbsDiff, od.NonFinite, od.Sample = nil, ok, sample
	case d > *od.MaxAbsDiff || od.Sample == "":
		od.MaxAbsDiff, od.Sample = &d, sample
	}
}

// outputSpecs lets ONNX Runtime size every output (so that a graph that
// returns another shape than the recording says so instead of failing to
// write into the reference's shape), except float16 and bfloat16 ones,
// which onnxruntime_go cannot read back unless they are pre-allocated.
func outputSpecs(refs []bundle.Tensor) []backend.OutputSpec {
	out := backend.OutputSpecsLike(refs)
	for i := range out {
		if out[i].DType != bundle.Float16 && out[i].DType != bundle.BFloat16 {
			out[i].Shape = nil
		}
	}
	return out
}

// runMessage is ONNX Runtime's own message, without the backend's prefixes.
func runMessage(err error) string {
	var f *backend.Failure
	if errors.As(err, &f) && f.Err != nil {
		return f.Err.Error()
	}
	return err.Error()
}

func failMessage(err error) string { return runMessage(err) }

var (
	reshapeErr   = regexp.MustCompile(`(?i)requested shape|reshape`)
	broadcastErr = regexp.MustCompile(`(?i)broadcast|incompatible dimensions|dimension mismatch|invalid dimensions|shape mismatch|not compatible`)
)

// Exporter is how a cause names the fix; the recorder and from-onnx both
// produce graphs through torch.onnx.export or a similar tracer.
const tracedHint = "export with that axis marked dynamic and compute sizes from tensors (x.shape[i] inside the traced code, not int() or a Python constant), or record only the shapes the graph was traced at"

func runCause(msg string) string {
	switch {
	case reshapeErr.MatchString(msg):
		return "a size the exporter traced in as a constant: the graph's Reshape asks for the shape of the call it was traced on, not this one; " + tracedHint
	case broadcastErr.MatchString(msg):
		return "a size the exporter traced in as a constant: two tensors whose sizes the recording varied together no longer agree in the graph; " + tracedHint
	}
	return "the exported graph does not run on this recorded call's inputs (a size or a value the exporter traced in as a constant is the usual reason); " + tracedHint
}

// inputsVs says how this sample's input shapes differ from the first
// sample's, which the graph was most likely traced on: the size to look
// for in the exporting code.
func inputsVs(g bundle.Graph, s bundle.Sample, all []bundle.Sample, k int) string {
	if k == 0 || len(all) == 0 {
		return ""
	}
	var diffs []string
	for i, in := range s.Inputs {
		if i < len(all[0].Inputs) && !slices.Equal(in.Shape, all[0].Inputs[i].Shape) {
			diffs = append(diffs, fmt.Sprintf("%s %v (sample 0: %v)", in.Name, in.Shape, all[0].Inputs[i].Shape))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return "; this call's inputs differ in shape from the first recorded call's: " + strings.Join(diffs, ", ")
}

func mismatchCause(outs []OutputReport, anyPassed bool) string {
	shape := false
	for _, o := range outs {
		if strings.Contains(o.Message, ": shape ") || strings.Contains(o.Message, "outputs, the recording has") {
			shape = true
		}
	}
	switch {
	case shape:
		return "the graph returns another shape than the recorded module: a size the exporter traced in as a constant; " + tracedHint
	case anyPassed:
		return "the graph reproduces another recorded call but not this one: data-dependent control flow (an if or a loop on tensor values) or a size the exporter traced in as a constant; " + tracedHint
	}
	return "the graph computes something other than the recorded outputs on every call: randomness or training-mode layers at export (dropout, batch-norm statistics: export in eval mode), an operator exported with other semantics, or a tolerance too tight for the model (loosen it with --atol/--rtol OUTPUT=VALUE if the difference is rounding)"
}

// Err is nil for a passing report, else one error naming the first
// failing graph, sample and output, the likely cause, and how many other
// samples failed.
func (r Report) Err() error {
	if r.OK {
		return nil
	}
	var first string
	failed := 0
	for _, g := range r.Graphs {
		if !g.OK && g.Error != "" {
			failed++
			if first == "" {
				first = fmt.Sprintf("graph %q does not load in ONNX Runtime: %s; likely cause: %s", g.Graph, ortMessage(g.Error), g.Cause)
			}
		}
		for _, s := range g.Samples {
			if s.OK {
				continue
			}
			failed++
			if first != "" {
				continue
			}
			if s.Error != "" {
				first = fmt.Sprintf("graph %q cannot reproduce its recording: sample %s (%d) does not run: %s; likely cause: %s", g.Graph, s.Sample, s.Index, ortMessage(s.Error), s.Cause)
				continue
			}
			o := s.Outputs[0]
			first = fmt.Sprintf("graph %q cannot reproduce its recording: sample %s (%d), %s; likely cause: %s", g.Graph, s.Sample, s.Index, ortMessage(o.Message), s.Cause)
			if len(s.Outputs) > 1 {
				first += fmt.Sprintf(" (%d more output(s) of this sample disagree)", len(s.Outputs)-1)
			}
		}
	}
	if failed > 1 {
		first += fmt.Sprintf(" [%d failures in all; -o json lists them]", failed)
	}
	return &MismatchError{msg: first}
}

// MismatchError says a bundle's graph cannot reproduce its recording: the
// bundle's fault (bad input), never the machine's.
type MismatchError struct{ msg string }

func (e *MismatchError) Error() string { return e.msg }

var (
	// ortSource is where in ONNX Runtime's source a message was raised and
	// the C++ signature after it: noise to a user, and it pushes the part
	// that says the shapes past any sensible cut.
	ortSource = regexp.MustCompile(`\S*onnxruntime_src/\S+:\d+ (\S+\(.*?\)( const)? )?`)
	ortAssert = regexp.MustCompile(`\S+ == \S+ was false\. `)
)

// ortMessage keeps a message from ONNX Runtime to a few hundred
// characters: without its source locations, and keeping its end, where
// ONNX Runtime says the shapes involved.
func ortMessage(s string) string {
	s = strings.TrimSpace(ortAssert.ReplaceAllString(ortSource.ReplaceAllString(s, ""), ""))
	return clip.Middle(s, 150, 250)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func graphNames(b *bundle.Bundle) []string {
	var out []string
	for _, g := range b.Manifest.Graphs {
		out = append(out, g.Name)
	}
	return out
}
