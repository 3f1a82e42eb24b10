package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/compare"

	"github.com/tunefleet/tunefleet/internal/human"
)

func newCompare(svc *services) *cobra.Command {
	var format string
	var differentModels bool
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B [--different-models] [-o table|json]",
		Short: "Put two runs side by side, graph by graph, and say what moved beyond noise",
		Long: "For every graph of the two runs: each run's winner, its throughput with its interval over the rounds of\n" +
			"its measurement, the ratio of B's throughput over A's with its interval, and whether it is beyond noise\n" +
			"by the rule a winner is decided by (the interval clears 1 by the minimum gain, 5 %). The runs' rounds\n" +
			"were not interleaved with each other, so the interval is Welch's. Reads only --store (run.json and the\n" +
			"graphs' result.json), so it works for runs Redis no longer has. Two runs of different models are refused\n" +
			"(exit 2) unless --different-models says that is meant. Exit 0 whatever moved; 2 when a run is not in the\n" +
			"store.",
		Example: "  producer compare demo_mlp-1a2b3c demo_mlp-4d5e6f\n  producer compare demo_mlp-1a2b3c demo_mlp-4d5e6f -o json",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "table") {
				return usageErr(fmt.Errorf("-o %q: want table or json", format))
			}
			ctx := cmd.Context()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			var runs [2]*compare.Run
			for i, id := range args {
				r, err := compare.Load(ctx, store, id)
				if errors.Is(err, compare.ErrNoRun) {
					return usageErr(err)
				}
				if err != nil {
					return err
				}
				runs[i] = r
			}
			if err := compare.SameModel(runs[0], runs[1]); err != nil && !differentModels {
				return usageErr(fmt.Errorf("%w; pass --different-models to compare them anyway", err))
			}
			c := compare.Runs(runs[0], runs[1])
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(c)
			}
			printComparison(cmd.OutOrStdout(), c)
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: table (or text) or json")
	cmd.Flags().BoolVar(&differentModels, "different-models", false, "compare runs of two different models (without it such a pair is refused, exit 2)")
	return cmd
}

// printComparison is compare's table: one row per graph.
func printComparison(w io.Writer, c compare.Comparison) {
	fmt.Fprintf(w, "A: run %s (model %s, target %s, %s)\n", c.A.Run, c.A.Model, c.A.Target, human.Time(c.A.SubmittedAt))
	fmt.Fprintf(w, "B: run %s (model %s, target %s, %s)\n", c.B.Run, c.B.Model, c.B.Target, human.Time(c.B.SubmittedAt))
	if !c.SameBundle {
		fmt.Fprintln(w, "the runs tuned different bundles")
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GRAPH\tWINNER A\tSAMPLES/S A\tWINNER B\tSAMPLES/S B\tB/A\tVERDICT")
	for _, g := range c.Graphs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, sideWinner(g.A), sideFigure(g.A), sideWinner(g.B), sideFigure(g.B),
			compare.RatioText(g.Ratio), compare.VerdictText(g.Verdict))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d graph(s) moved beyond noise (99 %% interval clear of 1 by %g %%)\n", c.BeyondNoise, len(c.Graphs), c.MinGain*100)
}

func sideWinner(s compare.Side) string {
	if s.Winner == "" {
		return "(" + s.Status + ")"
	}
	return s.Winner
}

func sideFigure(s compare.Side) string {
	if s.Throughput <= 0 {
		return "-"
	}
	if s.Hi > 0 {
		return fmt.Sprintf("%s (%s–%s)", backend.Human(s.Throughput), backend.Human(s.Lo), backend.Human(s.Hi))
	}
	return backend.Human(s.Throughput)
}
