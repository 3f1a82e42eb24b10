package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// cancelScript ends a run's pending graphs as cancelled and marks the run
// as asked to stop, unless it is final. Returns the graphs it cancelled,
// or {'final'} / {'norun'}.
var cancelScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {'norun'} end
local s = redis.call('HGET', KEYS[1], 'status')
if s == 'done' or s == 'failed' or s == 'cancelled' then return {'final'} end
redis.call('HSETNX', KEYS[1], 'cancel_requested', ARGV[1])
local gs = redis.call('SMEMBERS', KEYS[2])
for _, g in ipairs(gs) do
  redis.call('SREM', KEYS[2], g)
  redis.call('HSET', KEYS[3], g, ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'cancelled', 1)
end
return gs
`)

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
	st, _ := json.Marshal(GraphStatus{Status: GraphCancelled, Class: GraphCancelled, Message: "the run was cancelled"})
	res, err := cancelScript.Run(ctx, c.rdb, []string{runKey(run), pendingKey(run), graphsKey(run)},
		time.Now().UTC().Format(time.RFC3339Nano), string(st)).StringSlice()
	if err != nil {
		return out, fmt.Errorf("cancel run %s: %w", run, err)
	}
	if len(res) == 1 && res[0] == "norun" {
		return out, fmt.Errorf("cancel: %w %q", ErrNoRun, run)
	}
	if len(res) == 1 && res[0] == "final" {
		out.AlreadyFinal = true
		return out, nil
	}
	out.Graphs = res
	target, err := c.runs.Target(ctx, run)
	if err != nil {
		return out, err
	}
	insp := asynq.NewInspectorFromRedisClient(c.rdb)
	for _, g := range res {
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

// CancelRequested reports whether `producer cancel` asked the run to stop.
func (r *Runs) CancelRequested(ctx context.Context, run string) (bool, error) {
	n, err := r.rdb.HExists(ctx, runKey(run), "cancel_requested").Result()
	if err != nil {
		return false, fmt.Errorf("read run %s: %w", run, err)
	}
	return n, nil
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
