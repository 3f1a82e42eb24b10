package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"
)

// Cancelled is what Cancel did.
type Cancelled struct {
	Run string `json:"run"`
	// Graphs were pending and are now cancelled; their queued tasks were
	// deleted, and an attempt tuning one stops within a few seconds.
	Graphs []string `json:"graphs"`
	// AlreadyFinal is set when the run had ended before (nothing changed).
	AlreadyFinal bool `json:"already_final,omitempty"`
}

// Cancel stops a run: its pending graphs are cancelled and their queued
// tasks deleted, attempts in flight stop at their next check (the worker
// polls for it while tuning and kills its child processes), and the run
// finalizes as cancelled, without moving latest.json. Graphs already
// finished keep their results.
func (c *Client) Cancel(ctx context.Context, run string) (Cancelled, error) {
	out := Cancelled{Run: run}
	graphs, final, err := c.runs.Cancel(ctx, run)
	if err != nil {
		return out, err
	}
	if final {
		out.AlreadyFinal = true
		return out, nil
	}
	out.Graphs = graphs
	target, err := c.runs.Target(ctx, run)
	if err != nil {
		return out, err
	}
	insp := asynq.NewInspectorFromRedisClient(c.rdb)
	for _, g := range graphs {
		// An active task cannot be deleted; it finds its graph cancelled.
		err := insp.DeleteTask(Queue(target), GraphTaskID(run, g))
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) && !isActiveErr(err) {
			return out, fmt.Errorf("cancel run %s: delete graph %s's task: %w", run, g, err)
		}
	}
	return out, enqueueFinalize(ctx, c.runs, c.q, run, target)
}

// isActiveErr recognises asynq's refusal to delete an active task, which it
// returns as a plain error.
func isActiveErr(err error) bool {
	return err != nil && containsFold(err.Error(), "active")
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
