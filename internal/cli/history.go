package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/human"
)

// historyRow is one entry of `producer history -o json`: the entry and
// what changed from the one before it.
type historyRow struct {
	Entry   *history.Entry   `json:"entry"`
	Changes []history.Change `json:"changes"`
}

func newHistory(svc *services) *cobra.Command {
	var platform, format string
	var limit int
	cmd := &cobra.Command{
		Use:   "history MODEL --platform P [-o text|json]",
		Short: "Print a model's history on a platform, with what changed run to run",
		Long: "Print every finalized run of MODEL on P (a platform key or a target class such as cpu), oldest first,\n" +
			"from models/<MODEL>/<P>/history/ in --store, and what changed from the run before: the winner,\n" +
			"throughput or latency moved beyond measurement noise (slower is a regression), graphs newly failing\n" +
			"(a regression) or recovered. Needs only --store.",
		Example: "  producer history demo_mlp --platform cpu\n  producer history demo_mlp --platform cpu -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model := args[0]
			switch {
			case platform == "":
				return usageErr(fmt.Errorf("--platform is required (a platform key, or a target class such as cpu)"))
			case !okFormat(&format, "text"):
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			case limit < 0:
				return usageErr(fmt.Errorf("--limit %d: want 0 (all) or more", limit))
			}
			for what, v := range map[string]string{"MODEL": model, "--platform": platform} {
				if strings.ContainsAny(v, "/\\") || v == "." || v == ".." {
					return usageErr(fmt.Errorf("%s %q must be one name, without '/'", what, v))
				}
			}
			ctx := cmd.Context()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			// One more than asked: the oldest shown is compared too.
			n := limit
			if n > 0 {
				n++
			}
			list, err := history.List(ctx, store, model, platform, n)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				if hint := artifacts.ModelHint(ctx, store, model, platform); hint != "" {
					return usageErr(fmt.Errorf("%s has no history on %s in %s: %s", model, platform, svc.storeName(), hint))
				}
				return usageErr(fmt.Errorf("%s has no history on %s in %s (check the model name and --platform; `producer runs` lists runs)", model, platform, svc.storeName()))
			}
			rows := make([]historyRow, 0, len(list))
			for i, e := range list {
				ch := history.Compare(history.Previous(list, i), e)
				if ch == nil {
					ch = []history.Change{}
				}
				rows = append(rows, historyRow{Entry: e, Changes: ch})
			}
			if limit > 0 && len(rows) > limit {
				rows = rows[len(rows)-limit:]
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return printHistory(cmd, rows)
		},
	}
	cmd.Flags().StringVar(&platform, "platform", "", "platform key or target class (required)")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest N runs (0: all)")
	return cmd
}

func printHistory(cmd *cobra.Command, rows []historyRow) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	// UNSTABLE counts the graphs whose winner's measurement was unstable
	// (backend.Stats.Unstable; the footnote gives each one's cause): their
	// figures, and moves between them, may be noise.
	fmt.Fprintln(tw, "CREATED\tRUN\tNIGHTLY\tSTATUS\tGRAPHS\tREUSED\tUNSTABLE\tSPENT\tSAVED\tREGRESSIONS")
	var anyUnstable []unstableNote
	for _, r := range rows {
		e := r.Entry
		reused, unstable := 0, 0
		for _, g := range e.Graphs {
			if g.Reused {
				reused++
			}
			if g.Bench != nil && !g.Bench.Stable {
				unstable++
				anyUnstable = append(anyUnstable, unstableNote{e.Run + " graph " + g.Name, g.Bench.Stats().Cause()})
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%.1fs\t%.1fs\t%d\n", human.Time(e.Created), e.Run, orDash(e.Nightly), e.Status,
			len(e.Graphs), reused, unstableCell(unstable), e.SpentSeconds, e.SavedSeconds, history.Regressions(r.Changes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(anyUnstable) > 0 {
		fmt.Fprint(cmd.OutOrStdout(), unstableFootnote(anyUnstable, "graph measurement(s)"))
	}
	out := cmd.OutOrStdout()
	for _, r := range rows {
		for _, c := range r.Changes {
			mark := " "
			if c.Regression {
				mark = "!"
			}
			where := ""
			if c.Graph != "" {
				where = "graph " + c.Graph + " "
			}
			fmt.Fprintf(out, "%s %s %s%s: %s\n", mark, r.Entry.Run, where, strings.ReplaceAll(c.Kind, "_", " "), c.Detail)
		}
	}
	return nil
}

// unstableCell is a count of unstable measurements, marked when not zero.
func unstableCell(n int) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d%s", n, history.Unstable)
}
