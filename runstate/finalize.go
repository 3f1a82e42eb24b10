package runstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A run's finalize task ID carries a generation (jobs.FinalizeTaskID): a
// task asynq archived or completed without finalizing the run holds its
// ID, so the next enqueue moves the run to the next generation. Both the
// generation and the first finalize failure live in the run's hash.

// FinalizeGen is the generation of the run's finalize task ID.
func (r *Runs) FinalizeGen(ctx context.Context, run string) (int, error) {
	v, err := r.rdb.HGet(ctx, runKey(run), "finalize_gen").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read run %s: %w", run, err)
	}
	n, _ := strconv.Atoi(v)
	return n, nil
}

var nextGenScript = redis.NewScript(`
local g = tonumber(redis.call('HGET', KEYS[1], 'finalize_gen') or '0')
if g == tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], 'finalize_gen', g + 1) end
return 0
`)

// NextFinalizeGen moves the run past generation gen (once, however many
// callers saw it dead).
func (r *Runs) NextFinalizeGen(ctx context.Context, run string, gen int) error {
	if err := nextGenScript.Run(ctx, r.rdb, []string{runKey(run)}, gen).Err(); err != nil {
		return fmt.Errorf("next finalize of run %s: %w", run, err)
	}
	return nil
}

// queuedScript records that a finalize task of generation ARGV[1] is
// queued, while that is the run's generation (a run past it, or gone,
// is left alone: a marker must never create a run's hash).
var queuedScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'status', 'finalize_gen')
if not h[1] or (h[2] or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'finalize_queued', ARGV[1])
return 1
`)

// FinalizeQueued records that the run's finalize task of generation gen
// was enqueued (or found live): Begin and TaskState then no longer ask
// the tasks of the run's finished graphs to enqueue it, so that a
// duplicate task costs one round trip instead of an enqueue and an
// inspection of the queue. The marker only saves work: what enqueues a
// finalize otherwise (the completion of the last graph, submit, the
// reconciler) still checks the queue, and the reconciler replaces a
// queued finalize task that died without finalizing the run.
func (r *Runs) FinalizeQueued(ctx context.Context, run string, gen int) error {
	if err := queuedScript.Run(ctx, r.rdb, []string{runKey(run)}, strconv.Itoa(gen)).Err(); err != nil {
		return fmt.Errorf("record the finalize task of run %s as queued: %w", run, err)
	}
	return nil
}

// FinalizeFailed records that a finalize of the run failed and returns when
// its first failure happened (its retries are budgeted by time).
func (r *Runs) FinalizeFailed(ctx context.Context, run string) (since time.Time, err error) {
	now := time.Now().UTC()
	if err := r.rdb.HSetNX(ctx, runKey(run), "finalize_failing", now.UnixMilli()).Err(); err != nil {
		return now, fmt.Errorf("record finalize failure of run %s: %w", run, err)
	}
	v, err := r.rdb.HGet(ctx, runKey(run), "finalize_failing").Int64()
	if err != nil {
		return now, fmt.Errorf("read finalize failures of run %s: %w", run, err)
	}
	return time.UnixMilli(v).UTC(), nil
}

// Target is the target class (and queue) of a run.
func (r *Runs) Target(ctx context.Context, run string) (string, error) {
	t, err := r.rdb.HGet(ctx, runKey(run), "target").Result()
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("%w %q", ErrNoRun, run)
	}
	if err != nil {
		return "", fmt.Errorf("read run %s: %w", run, err)
	}
	return t, nil
}
