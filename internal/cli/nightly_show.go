package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/svgchart"
	"github.com/tunefleet/tunefleet/report"
)

func newNightlyList(svc *services) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the nightlies in the store, newest first",
		Long: "List every nightly with a plan in --store, newest first: its date, fleet digest, models, and, once its\n" +
			"morning report was written (producer nightly report, or nightly --wait), what it found: done, failed,\n" +
			"unchanged, regressions and device time spent vs saved by reuse. `producer serve` shows the same at /nightly.",
		Example: "  producer nightly list --store s3://tuning?endpoint=http://127.0.0.1:9000 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "table") {
				return usageErr(fmt.Errorf("-o %q: want table (or text) or json", format))
			}
			store, err := svc.openStoreToRead(cmd.Context())
			if err != nil {
				return err
			}
			list, err := report.List(cmd.Context(), store)
			if err != nil {
				return err
			}
			if format == "json" {
				if list == nil {
					list = []report.Listed{}
				}
				return writeJSON(cmd.OutOrStdout(), list)
			}
			printNightlies(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: table (or text) or json")
	return cmd
}

func newNightlyShow(svc *services) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "show NIGHTLY_ID",
		Short: "Show a nightly's morning report, summarized now (failures and regressions first)",
		Long: "Summarize a nightly from its plan and its runs' history entries as they are now, writing nothing: every\n" +
			"model x target with its status, regressions and what changed, failures first, then regressions, then\n" +
			"settings changes (candidates, strategy, tolerances, bench settings or toolchain differ from the previous\n" +
			"entry's: those moves are not regressions). producer nightly report writes the same to the store.",
		Example: "  producer nightly show 2026-12-01-0123456789ab --store s3://tuning?endpoint=http://127.0.0.1:9000",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "table") {
				return usageErr(fmt.Errorf("-o %q: want table (or text) or json", format))
			}
			if err := report.CheckNightly(args[0]); err != nil {
				return usageErr(err)
			}
			store, err := svc.openStoreToRead(cmd.Context())
			if err != nil {
				return err
			}
			s, err := report.Show(cmd.Context(), store, args[0])
			if errors.Is(err, report.ErrBadNightly) {
				return usageErr(err)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			printSummary(cmd.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: table (or text) or json")
	return cmd
}

func printNightlies(out io.Writer, list []report.Listed) {
	if len(list) == 0 {
		fmt.Fprintln(out, "no nightly in the store (producer nightly --fleet FLEET.yaml submits one)")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLANNED\tNIGHTLY\tFLEET\tMODELS\tDONE\tFAILED\tUNCHANGED\tREGRESSIONS\tSPENT\tSAVED")
	for _, l := range list {
		digest := strings.TrimPrefix(l.FleetDigest, "sha256:")
		if len(digest) > 12 {
			digest = digest[:12]
		}
		done, failed, regs, spent, saved := "-", "-", "-", "no report yet", ""
		if t := l.Totals; t != nil {
			done, failed, regs = fmt.Sprint(t.Done), fmt.Sprint(t.Failed), fmt.Sprint(t.Regressions)
			spent, saved = deviceTime(t.GPUSecondsSpent, t.CPUSecondsSpent), deviceTime(t.GPUSecondsSaved, t.CPUSecondsSaved)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", human.Time(l.CreatedAt), l.Nightly, digest, l.Models,
			done, failed, l.Unchanged, regs, spent, saved)
	}
	tw.Flush()
}

// deviceTime is GPU and CPU seconds in minutes, the one that is there.
func deviceTime(gpu, cpu float64) string {
	var parts []string
	if gpu > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GPU-min", gpu/60))
	}
	if cpu > 0 {
		parts = append(parts, fmt.Sprintf("%.1f CPU-min", cpu/60))
	}
	if parts == nil {
		return "0"
	}
	return strings.Join(parts, " + ")
}

// printSummary prints a nightly's summary: totals, then a row per model x
// target in the report's order, then what changed under each.
func printSummary(out io.Writer, s *report.Summary) {
	t := s.Totals
	fmt.Fprintf(out, "nightly %s (fleet %s): %d model × target, %d done, %d failed, %d pending, %d unchanged; %d regression(s), %d settings changed, %d new version(s), %d winner change(s)\n",
		s.Nightly, s.FleetDigest, t.Entries, t.Done, t.Failed, t.Pending, t.Unchanged, t.Regressions, t.SettingsChanged, t.NewVersions, t.WinnerChanges)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tTARGET\tSTATUS\tREGRESSIONS\tRUN\tNOTE")
	for _, e := range s.Entries {
		note := e.Error
		switch {
		case e.NewVersion != "":
			note = "new version: " + e.NewVersion
		case e.SettingsChanged != "":
			note = "settings changed: " + e.SettingsChanged
		case note == "" && len(e.Reasons) > 0:
			note = strings.Join(e.Reasons, "; ")
		case e.Carried:
			note = "carried forward: its work was done by this run"
			if e.CarriedFrom != "" {
				note += " of nightly " + e.CarriedFrom
			}
		}
		note, _, _ = strings.Cut(note, "\n") // a table cell is one line
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.Model, e.Target, e.Status, e.Regressions, orDash(e.Run), clip.Text(note, 160))
	}
	tw.Flush()
	for _, e := range s.Entries {
		for _, c := range e.Changes {
			if (c.Kind == history.ChangeSettings && e.NewVersion == "" || c.Kind == history.ChangeNewVersion) && c.Graph == "" {
				continue // on the row already
			}
			mark := " "
			if c.Regression {
				mark = "!"
			}
			graph := ""
			if c.Graph != "" {
				graph = " graph " + c.Graph
			}
			fmt.Fprintf(out, "%s %s on %s%s %s: %s\n", mark, e.Model, e.Target, graph, strings.ReplaceAll(c.Kind, "_", " "), c.Detail)
		}
		for _, g := range e.Graphs {
			if g.Bench != nil {
				fmt.Fprintf(out, "  %s on %s graph %s: %s at %s/s\n", e.Model, e.Target, g.Name, g.Candidate, svgchart.Num(g.Bench.Throughput))
			}
		}
	}
	if line := s.Webhook.Line(); line != "" {
		fmt.Fprintln(out, line)
	}
}
