package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/graphcheck"
	"github.com/tunefleet/tunefleet/ort"
)

func newBundleCheck() *cobra.Command {
	var (
		format, ortLib string
		graphs         []string
		first          bool
	)
	cmd := &cobra.Command{
		Use:   "check BUNDLE",
		Short: "Run every graph on its recorded samples with ONNX Runtime (CPU) and compare with the references",
		Long: "Check that each graph of a bundle reproduces its own recording: run every recorded sample with ONNX Runtime\n" +
			"on the CPU (all graph optimizations off) and compare the outputs with the recorded reference outputs within\n" +
			"the bundle's tolerances. Per output it prints the largest |diff| from the references over the samples and the\n" +
			"tolerance the check allows. A graph that does not reproduce is bad input (exit 2), named with the sample, the\n" +
			"output and the likely cause (e.g. a size the exporter traced in as a constant). -o json prints per-graph,\n" +
			"per-sample verdicts and the per-output figures on stdout, whatever the outcome. Exit 0: every graph reproduces\n" +
			"its recording; 2: one does not (or the bundle is invalid); 3: the check could not run (no ONNX Runtime library, disk).",
		Example: "  producer bundle check model-bundle\n  producer bundle check model-bundle -o json --graph 0",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			b, cleanup, err := openBundle(args[0])
			defer cleanup()
			if err != nil {
				return err
			}
			r, err := graphcheck.Bundle(cmd.Context(), b, graphcheck.Options{
				Backend: ort.New(ort.Options{Library: ortLib}), FirstOnly: first, Graphs: graphs,
			})
			if err != nil {
				if ue := (*graphcheck.UsageError)(nil); errors.As(err, &ue) {
					return usageErr(err)
				}
				return fmt.Errorf("check bundle %s: %w", args[0], err) // the machine: exit 3
			}
			r.Bundle = args[0] // an archive's path, not its scratch copy
			printCheck(cmd, r, format)
			if err := r.Err(); err != nil {
				return usageErr(err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&format, "output", "o", "text", "output format: text or json")
	fl.StringArrayVar(&graphs, "graph", nil, "check only this graph (repeatable; default: every graph)")
	fl.BoolVar(&first, "first", false, "check only each graph's first sample (quicker)")
	fl.StringVar(&ortLib, "ort-lib", "", "ONNX Runtime library (default: $"+ort.LibraryEnv+" or the one make ort fetched)")
	return cmd
}

// checkGraphs is submit --check: each graph's first sample, run with ONNX
// Runtime on the CPU, must reproduce its reference.
func checkGraphs(cmd *cobra.Command, b *bundle.Bundle, name, ortLib string) error {
	r, err := graphcheck.Bundle(cmd.Context(), b, graphcheck.Options{Backend: ort.New(ort.Options{Library: ortLib}), FirstOnly: true})
	if err != nil {
		return fmt.Errorf("check bundle %s: %w", name, err)
	}
	if err := r.Err(); err != nil {
		return usageErr(fmt.Errorf("bundle %s: %w (not submitted; producer bundle check %s says more)", name, err, name))
	}
	return nil
}

func printCheck(cmd *cobra.Command, r graphcheck.Report, format string) {
	w := cmd.OutOrStdout()
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return
	}
	for _, g := range r.Graphs {
		if g.Error != "" {
			fmt.Fprintf(w, "graph %s: does not load: %s\n", g.Graph, g.Error)
			continue
		}
		ok := 0
		for _, s := range g.Samples {
			if s.OK {
				ok++
			}
		}
		fmt.Fprintf(w, "graph %s: %d of %d sample(s) reproduce the recording\n", g.Graph, ok, len(g.Samples))
		for _, o := range g.Diffs {
			fmt.Fprintf(w, "  output %s: %s\n", o.Output, diffLine(o))
		}
		for _, s := range g.Samples {
			if s.OK {
				continue
			}
			if s.Error != "" {
				fmt.Fprintf(w, "  sample %s: does not run: %s\n", s.Sample, s.Error)
			}
			for _, o := range s.Outputs {
				fmt.Fprintf(w, "  sample %s: %s\n", s.Sample, o.Message)
			}
		}
	}
	verdict := "ok"
	if !r.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "bundle %s: %s (%d graph(s))\n", r.Bundle, verdict, len(r.Graphs))
}

// diffLine is how far one output is from its references at worst, and
// what the check allows it.
func diffLine(o graphcheck.OutputDiff) string {
	allowed := fmt.Sprintf("tolerance atol %g + rtol %g·|want|", o.ATol, o.RTol)
	if o.ATol == 0 && o.RTol == 0 {
		allowed = "must match exactly"
	}
	switch {
	case o.NonFinite:
		return fmt.Sprintf("a non-finite value differs (%s); %s", o.Sample, allowed)
	case o.MaxAbsDiff == nil:
		return fmt.Sprintf("cannot be compared element by element (%s: see its verdict); %s", o.Sample, allowed)
	}
	return fmt.Sprintf("max |diff| %.3g (%s); %s", *o.MaxAbsDiff, o.Sample, allowed)
}
