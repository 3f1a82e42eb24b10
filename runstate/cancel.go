package runstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

// Cancel marks a run as asked to stop and ends its pending graphs as
// cancelled, in one step. It returns the graphs it cancelled (whose queued
// tasks the caller deletes before it enqueues the run's finalize), or
// alreadyFinal when the run had ended before (nothing changed). A run
// Redis does not know gives ErrNoRun.
func (r *Runs) Cancel(ctx context.Context, run string) (graphs []string, alreadyFinal bool, err error) {
	st, _ := json.Marshal(GraphStatus{Status: GraphCancelled, Class: GraphCancelled, Message: "the run was cancelled"})
	res, err := cancelScript.Run(ctx, r.rdb, []string{runKey(run), pendingKey(run), graphsKey(run)},
		time.Now().UTC().Format(time.RFC3339Nano), string(st)).StringSlice()
	if err != nil {
		return nil, false, fmt.Errorf("cancel run %s: %w", run, err)
	}
	if len(res) == 1 && res[0] == "norun" {
		return nil, false, fmt.Errorf("cancel: %w %q", ErrNoRun, run)
	}
	if len(res) == 1 && res[0] == "final" {
		return nil, true, nil
	}
	return res, false, nil
}

// CancelRequested reports whether `producer cancel` asked the run to stop.
func (r *Runs) CancelRequested(ctx context.Context, run string) (bool, error) {
	n, err := r.rdb.HExists(ctx, runKey(run), "cancel_requested").Result()
	if err != nil {
		return false, fmt.Errorf("read run %s: %w", run, err)
	}
	return n, nil
}
