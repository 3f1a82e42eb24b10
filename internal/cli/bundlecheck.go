package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/ort"
)

// checkReport is what `producer bundle check -o json` prints: every
// sample of every graph run through the graph's own ONNX file, output by
// output against the bundle's reference outputs.
type checkReport struct {
	Dir    string       `json:"dir"`
	OK     bool         `json:"ok"`
	Graphs []checkGraph `json:"graphs"`
}

type checkGraph struct {
	Name    string        `json:"name"`
	Error   string        `json:"error,omitempty"` // the graph did not build
	Samples []checkSample `json:"samples"`
}

type checkSample struct {
	Sample string `json:"sample"`
	// Error: the run itself failed (ONNX Runtime's message).
	Error   string        `json:"error,omitempty"`
	Outputs []checkOutput `json:"outputs,omitempty"`
}

type checkOutput struct {
	Name  string  `json:"name"`
	OK    bool    `json:"ok"`
	Shape []int64 `json:"shape"`
	// MaxAbsDiff is the largest |graph - reference| over the elements
	// (floats and integers; null for bool or a shape mismatch).
	MaxAbsDiff *float64 `json:"max_abs_diff"`
	Message    string   `json:"message,omitempty"`
}

func newCheck() *cobra.Command {
	var format, ortLib string
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Run every sample through its graph with ONNX Runtime (CPU) and compare with the reference outputs",
		Long: "Run each recorded sample through its graph's ONNX file with ONNX Runtime on the CPU, all graph\n" +
			"optimizations off (" + bundlegen.ReferenceCandidate + "), and compare every output with the sample's\n" +
			"reference output under the bundle's tolerances (the correctness check workers apply).\n" +
			"A graph that does not reproduce its own recording would fail on every worker. Exit 0 when every\n" +
			"sample matches, 1 when one does not, 2 for an invalid bundle, 3 when ONNX Runtime cannot start.",
		Example: "  producer bundle check my-bundle -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			b, cleanup, err := openBundle(args[0])
			defer cleanup()
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "tunefleet-check-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			rep, err := checkBundle(cmd.Context(), b, ort.New(ort.Options{Library: ortLib}), work)
			if err != nil {
				return err
			}
			rep.Dir = args[0]
			if err := printCheck(cmd, rep, format); err != nil {
				return err
			}
			if !rep.OK {
				return failedErr(fmt.Errorf("bundle %s: %s", args[0], firstProblem(rep)))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&ortLib, "ort-lib", "", "ONNX Runtime library (default: $"+ort.LibraryEnv+" or the one make ort fetched)")
	return cmd
}

// checkBundle runs every sample; only the machine failing (no ONNX
// Runtime) is an error, a graph that does not build or run is in the report.
func checkBundle(ctx context.Context, b *bundle.Bundle, ref backend.Backend, work string) (checkReport, error) {
	rep := checkReport{OK: true}
	cand, err := backend.ParseCandidate(bundlegen.ReferenceCandidate)
	if err != nil {
		return rep, err
	}
	for gi, g := range b.Manifest.Graphs {
		cg := checkGraph{Name: g.Name}
		samples, err := b.Samples(g.Name)
		if err != nil {
			return rep, usageErr(err)
		}
		eng, err := ref.Build(ctx, backend.BuildRequest{Model: b.Manifest.Model, Graph: g,
			ONNXPath: filepath.Join(b.Dir, filepath.FromSlash(g.ONNX)), Candidate: cand,
			WorkDir: filepath.Join(work, fmt.Sprint(gi))})
		if err != nil {
			if backend.ClassOf(err, "") == backend.FailInfrastructure {
				return rep, err
			}
			cg.Error = err.Error()
			rep.OK = false
			rep.Graphs = append(rep.Graphs, cg)
			continue
		}
		for _, s := range samples {
			cs := checkSample{Sample: s.Dir}
			got, err := eng.Run(ctx, s.Inputs, backend.OutputSpecsLike(s.Outputs))
			if err != nil {
				if backend.ClassOf(err, "") == backend.FailInfrastructure && ctx.Err() != nil {
					eng.Close()
					return rep, err
				}
				cs.Error = err.Error()
				rep.OK = false
			} else {
				for i := range s.Outputs {
					co := compareOutput(&got[i], &s.Outputs[i], g.Tolerances)
					rep.OK = rep.OK && co.OK
					cs.Outputs = append(cs.Outputs, co)
				}
			}
			cg.Samples = append(cg.Samples, cs)
		}
		eng.Close()
		rep.Graphs = append(rep.Graphs, cg)
	}
	return rep, nil
}

func compareOutput(got, want *bundle.Tensor, tol map[string]bundle.Tolerance) checkOutput {
	co := checkOutput{Name: want.Name, Shape: got.Shape, OK: true}
	if err := backend.Check([]bundle.Tensor{*got}, []bundle.Tensor{*want}, tol); err != nil {
		co.OK = false
		co.Message = err.Error()
	}
	co.MaxAbsDiff = maxAbsDiff(got, want)
	return co
}

// maxAbsDiff is the largest elementwise |got - want| (bools as 0/1), or
// nil where it has no meaning (different shapes or dtypes, a non-finite
// difference: JSON has no NaN, and the check's message says what is wrong).
func maxAbsDiff(got, want *bundle.Tensor) *float64 {
	if got.DType != want.DType || len(got.Data) != len(want.Data) || !slices.Equal(got.Shape, want.Shape) {
		return nil
	}
	worst := 0.0
	for i := range want.Len() {
		g, w := got.Float64At(i), want.Float64At(i)
		if g == w || (math.IsNaN(g) && math.IsNaN(w)) {
			continue
		}
		d := math.Abs(g - w)
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil
		}
		worst = max(worst, d)
	}
	return &worst
}

func firstProblem(rep checkReport) string {
	for _, g := range rep.Graphs {
		if g.Error != "" {
			return fmt.Sprintf("graph %s does not build: %s", g.Name, g.Error)
		}
		for _, s := range g.Samples {
			if s.Error != "" {
				return fmt.Sprintf("graph %s, %s: the graph does not run: %s", g.Name, s.Sample, s.Error)
			}
			for _, o := range s.Outputs {
				if !o.OK {
					return fmt.Sprintf("graph %s, %s: the graph does not reproduce the reference: %s", g.Name, s.Sample, o.Message)
				}
			}
		}
	}
	return "ok"
}

func printCheck(cmd *cobra.Command, rep checkReport, format string) error {
	w := cmd.OutOrStdout()
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, g := range rep.Graphs {
		if g.Error != "" {
			fmt.Fprintf(w, "graph %s: does not build: %s\n", g.Name, g.Error)
			continue
		}
		for _, s := range g.Samples {
			if s.Error != "" {
				fmt.Fprintf(w, "graph %s %s: FAIL: %s\n", g.Name, s.Sample, s.Error)
				continue
			}
			var bad []string
			worst := 0.0
			for _, o := range s.Outputs {
				if !o.OK {
					bad = append(bad, o.Message)
				}
				if o.MaxAbsDiff != nil {
					worst = math.Max(worst, *o.MaxAbsDiff)
				}
			}
			if len(bad) > 0 {
				fmt.Fprintf(w, "graph %s %s: FAIL: %s\n", g.Name, s.Sample, strings.Join(bad, "; "))
			} else {
				fmt.Fprintf(w, "graph %s %s: ok (max |diff| %.3g)\n", g.Name, s.Sample, worst)
			}
		}
	}
	return nil
}
