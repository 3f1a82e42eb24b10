package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/storegc"
)

// gcFlags are `producer gc`'s flags.
type gcFlags struct {
	keepRuns  int
	olderThan string
	grace     time.Duration
	dryRun    bool
	format    string
}

// options checks the flags; its errors are the user's.
func (f *gcFlags) options() (storegc.Options, error) {
	o := storegc.Options{KeepRuns: f.keepRuns, Grace: f.grace}
	if f.format != "text" && f.format != "json" {
		return o, usageErr(fmt.Errorf("-o %q: want text or json", f.format))
	}
	if f.keepRuns < 0 {
		return o, usageErr(fmt.Errorf("--keep-runs %d: want 0 or more", f.keepRuns))
	}
	d, err := parseAge(f.olderThan)
	if err != nil {
		return o, usageErr(fmt.Errorf("--older-than %q: %w", f.olderThan, err))
	}
	o.OlderThan = d
	if f.grace < time.Minute {
		return o, usageErr(fmt.Errorf("--grace %s: want at least 1m (longer than any upload takes to be named by its manifest)", f.grace))
	}
	return o, nil
}

// parseAge reads a Go duration or a whole number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want a duration such as 720h or 30d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 720h or 30d")
	}
	return d, nil
}

func newGC(svc *services) *cobra.Command {
	f := &gcFlags{}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove old runs and the blobs nothing kept references (a dry run unless --dry-run=false)",
		Long: "Mark and sweep the store. A run goes when it is final (Redis says so with --redis; without it, or once\n" +
			"Redis has forgotten the run, it has a state.json), is not among the --keep-runs newest of its model and\n" +
			"target, finished more than --older-than ago, and no latest.json names it. Every JSON document left\n" +
			"(kept runs, latest.json, history, the result index and negative cache, nightly plans) marks each sha256\n" +
			"it mentions; a blob nothing marks goes once it is older than --grace, so a run in flight never loses one.\n" +
			"By default it only prints what it would remove and how many bytes; --dry-run=false removes it.",
		Example: "  producer gc --store file://./store\n" +
			"  producer gc --keep-runs 3 --older-than 30d --dry-run=false --redis redis://127.0.0.1:6379/0 --store s3://tunefleet?endpoint=http://127.0.0.1:9000",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			if svc.redis != "" {
				rdb, err := svc.openRedis(ctx)
				if err != nil {
					return err
				}
				defer rdb.Close()
				o.Final = runstate.NewRuns(rdb).Known
			}
			plan, err := storegc.Collect(ctx, store, o)
			if err != nil {
				return err
			}
			res := gcResult{Plan: plan, DryRun: f.dryRun}
			if !f.dryRun {
				res.Deleted, res.DeletedBytes, err = plan.Sweep(ctx, store, o)
				if err != nil {
					return fmt.Errorf("gc removed %d objects (%d bytes) and stopped: %w; run it again to finish", res.Deleted, res.DeletedBytes, err)
				}
			}
			if f.format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printGC(cmd.OutOrStdout(), res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.keepRuns, "keep-runs", storegc.DefaultKeepRuns, "newest final runs of each model and target to keep whatever their age")
	fl.StringVar(&f.olderThan, "older-than", "7d", "only remove runs that finished longer ago than this (a duration, e.g. 720h, or days, e.g. 30d; 0: any age)")
	fl.DurationVar(&f.grace, "grace", storegc.DefaultGrace, "never remove a blob written less than this long ago (at least 1m)")
	fl.BoolVar(&f.dryRun, "dry-run", true, "only print what would be removed; --dry-run=false removes it")
	fl.StringVarP(&f.format, "output", "o", "text", "output format: text or json")
	return cmd
}

// gcResult is what `producer gc -o json` prints.
type gcResult struct {
	*storegc.Plan
	DryRun       bool  `json:"dry_run"`
	Deleted      int   `json:"deleted"`
	DeletedBytes int64 `json:"deleted_bytes"`
}

func printGC(w io.Writer, r gcResult) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	p := r.Plan
	for _, run := range p.Runs {
		fmt.Fprintf(w, "%s run %s (%s, %s, finished %s): %d objects, %s\n", verb, run.Run, run.Model, run.Target,
			run.Finished.UTC().Format(time.RFC3339), len(run.Objects), humanBytes(run.Bytes))
	}
	for _, b := range p.Blobs {
		fmt.Fprintf(w, "%s %s: %s\n", verb, b.Key, humanBytes(b.Size))
	}
	fmt.Fprintf(w, "%s %d runs and %d unreferenced blobs: %s (%d bytes)\n", verb, len(p.Runs), len(p.Blobs), humanBytes(p.Bytes), p.Bytes)
	fmt.Fprintf(w, "kept %d final runs and %d not final; %d blobs referenced by %d documents, %d too young to judge\n",
		p.KeptRuns, p.NotFinalRuns, p.MarkedBlobs, p.Roots, p.YoungBlobs)
	if r.DryRun && p.Bytes > 0 {
		fmt.Fprintln(w, "dry run: nothing removed; --dry-run=false removes it")
	}
}

// humanBytes formats a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
