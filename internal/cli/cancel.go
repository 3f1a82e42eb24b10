package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

func newCancel(svc *services) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Stop a run: drop its pending graphs and end it as cancelled",
		Long: "Cancel a run: its pending graphs are dropped and their queued tasks deleted, attempts in flight stop\n" +
			"within seconds (their child processes are killed), and the run is finalized as cancelled: state.json\n" +
			"records the graphs that had finished, and latest.json does not move. A run already ended is left alone.",
		Example: "  producer cancel demo_model-79a381d91c55 --redis redis://127.0.0.1:6379/0",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rdb, err := fleetRedis(cmd, svc, "cancel", format)
			if err != nil {
				return err
			}
			defer rdb.Close()
			c := jobs.NewClient(rdb, nil)
			defer c.Close()
			res, err := c.Cancel(ctx, args[0])
			if errors.Is(err, runstate.ErrNoRun) {
				return usageErr(err)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			switch {
			case res.AlreadyFinal:
				fmt.Fprintf(cmd.OutOrStdout(), "run %s had already ended; nothing changed\n", res.Run)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "run %s: cancelled, %d pending graph(s) dropped%s; it finalizes as cancelled\n",
					res.Run, len(res.Graphs), listed(res.Graphs))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text or json")
	return cmd
}

func listed(gs []string) string {
	if len(gs) == 0 || len(gs) > 10 {
		return ""
	}
	return " (" + strings.Join(gs, ", ") + ")"
}

func newReconcile(svc *services) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "reconcile [RUN]",
		Short: "Repair runs that cannot finish by themselves (workers do this every 30 s)",
		Long: "One pass of the reconciler over the running runs (or RUN): a graph whose task asynq archived without\n" +
			"recording it (its worker died on the last attempt) is recorded as failed; a pending graph whose task is\n" +
			"gone gets it again; a run Redis lost is rebuilt from --store; a run whose graphs all finished gets its\n" +
			"finalize. Prints each repair. Workers run the same pass every --reconcile-every, one at a time.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rdb, err := fleetRedis(cmd, svc, "reconcile", format)
			if err != nil {
				return err
			}
			defer rdb.Close()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			rec := jobs.NewReconciler(rdb, store, nil)
			rec.MinAge = 0
			var reps []jobs.Repair
			if len(args) == 1 {
				reps, err = rec.Run(ctx, args[0])
			} else {
				reps, err = rec.Pass(ctx)
			}
			if errors.Is(err, runstate.ErrNoRun) {
				return usageErr(err)
			}
			if format == "json" {
				if reps == nil {
					reps = []jobs.Repair{}
				}
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(reps); jerr != nil {
					return jerr
				}
			} else {
				for _, r := range reps {
					fmt.Fprintln(cmd.OutOrStdout(), r)
				}
				if len(reps) == 0 && err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), "nothing to repair")
				}
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text or json")
	return cmd
}
