package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/suggest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/targetclass"

	"github.com/tunefleet/tunefleet/internal/clip"
)

func needRedis(svc *services, what string) error {
	if svc.redis == "" {
		return usageErr(fmt.Errorf("%s needs --redis (or $%s): embedded runs live only inside the `producer submit` that started them; their artifacts are in --store (use `producer fetch`)", what, RedisEnv))
	}
	return nil
}

// fleetRedis checks the output format and connects to the fleet's Redis,
// for the commands that read or change runs (what names the command).
// Close the client when done.
func fleetRedis(cmd *cobra.Command, svc *services, what string, format *string) (redis.UniversalClient, error) {
	if !okFormat(format, "text") {
		return nil, usageErr(fmt.Errorf("-o %q: want text or json", *format))
	}
	if err := needRedis(svc, what); err != nil {
		return nil, err
	}
	return svc.openRedis(cmd.Context())
}

func newStatus(svc *services) *cobra.Command {
	var (
		format  string
		watch   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "Show a run's per-graph status (or the recent runs)",
		Long: "Show a run's per-graph status: each graph's winner and its measurement (~ marks one whose stop rule never saw\n" +
			"a stable window), or why it failed, or, while it is pending, its attempts and what asynq records of its task:\n" +
			"its state, how often asynq retried it and its last error. A run Redis has lost (a restart without persistence)\n" +
			"is rebuilt from --store, where its run.json and results are. Without RUN, list the recent runs.\n" +
			"--watch follows the run to its end: on a terminal its table is redrawn in place, elsewhere one line is printed\n" +
			"per change (on stderr; the final table or JSON goes to stdout). Without RUN, --watch redraws the recent runs\n" +
			"until interrupted or --timeout.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 || timeout > 0 && !watch {
				return usageErr(fmt.Errorf("--timeout needs --watch and a positive duration"))
			}
			// -o jsonl: one compact JSON object a line, one per change of a
			// watched run (a stream a script reads line by line).
			jsonl := format == "jsonl"
			if jsonl {
				if len(args) == 0 {
					return usageErr(fmt.Errorf("-o jsonl streams one run: give RUN (with --watch, a line per change)"))
				}
				format = "json"
			}
			ctx := cmd.Context()
			rdb, err := fleetRedis(cmd, svc, "status", &format)
			if err != nil {
				return err
			}
			defer rdb.Close()
			runs := runstate.NewRuns(rdb)
			if len(args) == 0 {
				if watch {
					return watchRuns(ctx, cmd, runs, format, timeout)
				}
				// JSON prints each run whole, graphs included.
				list, err := runs.List(ctx, runstate.ListOptions{Limit: recentRuns, Graphs: format != "text"})
				if err != nil {
					return err
				}
				if err := printRuns(cmd, list, format); err != nil || format == "json" {
					return err
				}
				for _, line := range waitingLines(ctx, rdb, list) {
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
				return nil
			}
			if jsonl {
				format = "jsonl"
			}
			return statusOf(cmd, svc, runs, args[0], format, watch, timeout)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table), json, or jsonl (RUN: one line per change with --watch)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the run to its end (riding out Redis blips of up to a minute); exit non-zero if it did not succeed")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --watch, stop following after this long (exit 1; the run goes on); 0: no limit")
	return cmd
}

// recentRuns is how many runs `status` without RUN lists.
const recentRuns = 10

// statusOf prints one run's status, following it with watch.
func statusOf(cmd *cobra.Command, svc *services, runs *runstate.Runs, run, format string, watch bool, timeout time.Duration) error {
	ctx := cmd.Context()
	// The store is read only if Redis lost the run: then its record is
	// rebuilt from it. A store that cannot be opened just cannot help.
	store, serr := svc.openStoreToRead(ctx)
	if serr != nil {
		store = nil
	}
	var (
		st   runstate.RunStatus
		err  error
		live *liveTable
	)
	if watch {
		if format == "text" {
			live = liveOn(cmd.OutOrStdout())
		}
		fl := follower{runs: runs, store: store, out: followOut(cmd, format), live: live, tasks: true, timeout: timeout, every: time.Second,
			render: func(st runstate.RunStatus) string {
				out := watchedRun(st, svc.storeName(), time.Now())
				if !st.Final() {
					if w := waitingFor(ctx, runs.Client(), st.Target); w != nil {
						out += w.Message + "\n"
					}
				}
				return out
			}}
		if format == "jsonl" {
			fl.stream = jsonLines(cmd.OutOrStdout(), func(st runstate.RunStatus) any {
				var wait *targetclass.Wait
				if !st.Final() {
					wait = waitingFor(ctx, runs.Client(), st.Target)
				}
				return runWithWait{st, wait}
			})
		}
		st, err = fl.wait(ctx, run)
	} else {
		st, err = getRun(ctx, runs, store, run, cmd.ErrOrStderr())
		if err == nil {
			err = jobs.AddTasks(ctx, runs, &st)
		}
	}
	if errors.Is(err, runstate.ErrNoRun) {
		return usageErr(err)
	}
	if err != nil {
		return err
	}
	var wait *targetclass.Wait
	if !st.Final() {
		wait = waitingFor(ctx, runs.Client(), st.Target)
	}
	// The state's location is printed only when the store says it is
	// there: a wrong --store must not print a confident URL.
	storeName, stateErr := svc.storeName(), stateThere(ctx, store, serr, svc.storeName(), st.StateKey)
	if stateErr != nil {
		storeName = ""
	}
	switch {
	case format == "jsonl" && watch: // the stream's last line is the run as it ended
	case format == "jsonl":
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(runWithWait{st, wait}); err != nil {
			return err
		}
	case format == "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(runWithWait{st, wait}); err != nil {
			return err
		}
	case live == nil: // a live table shows the final one already
		printRun(cmd.OutOrStdout(), st, storeName)
		if wait != nil {
			fmt.Fprintln(cmd.OutOrStdout(), wait.Message)
		}
	}
	// A script following a run learns how it ended from the exit status,
	// whatever the output format.
	if watch && st.Status != runstate.RunDone {
		return failedErr(fmt.Errorf("run %s %s", st.Run, st.Status))
	}
	return stateErr
}

// stateThere checks that key (a final run's state.json) is in the store
// (opened with serr): nil when it is, or when there is no state yet;
// else what is wrong, marked for the exit-code table: not there or no
// such store is the user's --store (2), a store that did not answer a
// service (3).
func stateThere(ctx context.Context, store artifacts.Store, serr error, storeName, key string) error {
	if key == "" {
		return nil
	}
	if serr != nil {
		return fmt.Errorf("state: not shown: --store %s could not be read: %w", storeName, serr)
	}
	_, err := store.Stat(ctx, key)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		return usageErr(fmt.Errorf("state: %s is not in --store %s (the run's record in Redis names it; is --store the store the run was submitted to?)", key, storeName))
	case err != nil:
		return fmt.Errorf("state: not shown: --store %s could not be read: %w", storeName, err)
	}
	return nil
}

// watchedRun is the live table of a followed run: its table under a line
// saying it is being watched, which goes once the run is final.
func watchedRun(st runstate.RunStatus, store string, now time.Time) string {
	var b strings.Builder
	if !st.Final() {
		fmt.Fprintf(&b, "watching run %s, updated %s (Ctrl-C stops watching; the run goes on)\n", st.Run, human.Clock(now))
	}
	printRun(&b, st, store)
	return b.String()
}

func newRuns(svc *services) *cobra.Command {
	var (
		format, model, status, before string
		limit                         int
	)
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List recent runs, newest first, a page at a time",
		Long: "List runs newest first from Redis's indexes (by model, by status): a page costs the same however long the\n" +
			"history. Redis keeps a finished run's record for the workers' --retention (default 30 days); the store keeps\n" +
			"the run itself, and `producer status RUN` rebuilds an expired one from it. --before pages back.",
		Example: "  producer runs --model convnet --status done --limit 10\n  producer runs --limit 10 --before 2026-11-30T02:00:00Z",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch status {
			case "", runstate.RunRunning, runstate.RunDone, runstate.RunFailed, runstate.RunCancelled:
			default:
				return usageErr(fmt.Errorf("--status %q: want %s, %s, %s or %s", status, runstate.RunRunning, runstate.RunDone, runstate.RunFailed, runstate.RunCancelled))
			}
			if limit < 0 {
				return usageErr(fmt.Errorf("--limit %d: want 0 (all) or more", limit))
			}
			// JSON prints each run whole, graphs included; the table
			// needs only what finalize summed up (ListOptions.Graphs).
			o := runstate.ListOptions{ModelLike: model, Status: status, Limit: limit, Graphs: format != "text"}
			if before != "" {
				t, err := time.Parse(time.RFC3339Nano, before)
				if err != nil {
					return usageErr(fmt.Errorf("--before %q: want an RFC 3339 time, e.g. 2026-11-30T02:00:00Z", before))
				}
				o.Before = t
			}
			rdb, err := fleetRedis(cmd, svc, "runs", &format)
			if err != nil {
				return err
			}
			defer rdb.Close()
			runs := runstate.NewRuns(rdb)
			list, err := runs.List(cmd.Context(), o)
			if err != nil {
				return err
			}
			if err := printRuns(cmd, list, format); err != nil {
				return err
			}
			if len(list) == 0 && model != "" && format == "text" {
				noModelLike(cmd.Context(), cmd.ErrOrStderr(), runs, model)
			}
			if format == "text" && limit > 0 && len(list) == limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --before %s\n", list[len(list)-1].CreatedAt.Format(time.RFC3339Nano))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	cmd.Flags().StringVar(&model, "model", "", "only runs of this model (its whole name), else of models containing it (a leading ^: starting with it)")
	cmd.Flags().StringVar(&status, "status", "", "only runs with this status: running, done, failed, cancelled")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many runs (0: all)")
	cmd.Flags().StringVar(&before, "before", "", "only runs created before this time (RFC 3339; the next page starts at the last run's creation time)")
	return cmd
}

func printRuns(cmd *cobra.Command, list []runstate.RunStatus, format string) error {
	if format == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if list == nil {
			list = []runstate.RunStatus{}
		}
		return enc.Encode(list)
	}
	return printRunsTable(cmd.OutOrStdout(), list)
}

func printRunsTable(w io.Writer, list []runstate.RunStatus) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	// WINNERS sums the graphs' winners up; SPEEDUP is the geometric mean
	// of their speedups over the baseline candidate; REUSED the graphs
	// taken from the result index, with the runs that measured them.
	fmt.Fprintln(tw, "RUN\tMODEL\tTARGET\tNIGHTLY\tSTATUS\tGRAPHS\tFAILED\tWINNERS\tSPEEDUP\tREUSED\tCREATED\tTOOK")
	now := time.Now()
	for _, r := range list {
		sum := r.Summary()
		speedup, reused := "-", "-"
		if sum.SpeedupGraphs > 0 {
			speedup = fmt.Sprintf("%.2f×", sum.Speedup)
		}
		if sum.Reused > 0 {
			reused = fmt.Sprintf("%d", sum.Reused)
			if len(sum.ReusedFrom) > 0 {
				reused += " from " + strings.Join(sum.ReusedFrom, ",")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Run, r.Model, r.Target, orDash(r.Nightly), r.Status, r.Done+r.Failed, r.Total, r.Failed,
			orDash(sum.Winners), speedup, reused, human.Time(r.CreatedAt), human.Duration(r.Duration(now)))
	}
	return tw.Flush()
}

// watchRuns redraws the recent runs on a terminal, or prints a line per
// run whose progress changed elsewhere, until ctx ends or timeout passes
// (exit 0: there is no end to wait for).
func watchRuns(ctx context.Context, cmd *cobra.Command, runs *runstate.Runs, format string, timeout time.Duration) error {
	if format != "text" {
		return usageErr(fmt.Errorf("--watch without RUN draws a table: drop -o %s (or --watch, to list the runs once)", format))
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out := cmd.OutOrStdout()
	live := liveOn(out)
	seen := map[string]string{}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		list, err := runs.List(ctx, runstate.ListOptions{Limit: recentRuns, Graphs: format != "text"})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if live != nil {
			var b strings.Builder
			fmt.Fprintf(&b, "the %d most recent runs, updated %s (Ctrl-C stops)\n", recentRuns, human.Clock(time.Now()))
			printRunsTable(&b, list)
			for _, line := range waitingLines(ctx, runs.Client(), list) {
				b.WriteString(line + "\n")
			}
			live.draw(b.String())
		} else {
			for _, r := range list {
				line := fmt.Sprintf("run %s (model %s, target %s): %d/%d graph(s) finished (%d failed), %s",
					r.Run, r.Model, r.Target, r.Done+r.Failed+r.Cancelled, r.Total, r.Failed, r.Status)
				if seen[r.Run] != line {
					fmt.Fprintln(out, line)
					seen[r.Run] = line
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writeJSON writes v indented, as every -o json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// noModelLike says, when no model with runs has a name like pattern, that
// none has, and the name it may have meant (from the names alone, never
// the history).
func noModelLike(ctx context.Context, w io.Writer, runs *runstate.Runs, pattern string) {
	names, err := runs.Models(ctx)
	if err != nil {
		return
	}
	for _, n := range names {
		if runstate.ModelLike(n, pattern) {
			return // a model matches: only the filters left its runs out
		}
	}
	msg := fmt.Sprintf("no model with runs in Redis has a name like %q", clip.Counted(pattern, clip.Echo))
	if s := suggest.Closest(strings.TrimPrefix(pattern, "^"), names, bundle.MaxModelNameBytes); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	fmt.Fprintln(w, msg)
}

// jsonLines is a follower's stream for -o jsonl: the value view makes of
// the run, as one compact JSON line on w, each time it differs from the
// line before.
func jsonLines(w io.Writer, view func(runstate.RunStatus) any) func(runstate.RunStatus) error {
	var last []byte
	return func(st runstate.RunStatus) error {
		b, err := json.Marshal(view(st))
		if err != nil {
			return err
		}
		if bytes.Equal(b, last) {
			return nil
		}
		last = b
		_, err = w.Write(append(b, '\n'))
		return err
	}
}
