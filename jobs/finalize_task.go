package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/tuner"
)

// enqueueFinalize enqueues a run's finalize task once per generation (see
// FinalizeTaskID). When the generation's ID is taken by a task that can no
// longer run (archived, or completed while the run is not final) the run
// moves to the next generation and enqueues again; a live task (pending,
// scheduled, retrying or active) makes this a no-op.
func enqueueFinalize(ctx context.Context, runs *Runs, q *asynq.Client, run, target string) error {
	_, err := enqueueFinalizeReport(ctx, runs, q, run, target)
	return err
}

// enqueueFinalizeIn is enqueueFinalize with the task held back for delay.
func enqueueFinalizeIn(ctx context.Context, runs *Runs, q *asynq.Client, run, target string, delay time.Duration) error {
	_, err := enqueueFinalizeAfter(ctx, runs, q, run, target, delay)
	return err
}

// enqueueFinalizeReport is enqueueFinalize, telling whether it enqueued.
func enqueueFinalizeReport(ctx context.Context, runs *Runs, q *asynq.Client, run, target string) (bool, error) {
	return enqueueFinalizeAfter(ctx, runs, q, run, target, 0)
}

func enqueueFinalizeAfter(ctx context.Context, runs *Runs, q *asynq.Client, run, target string, delay time.Duration) (bool, error) {
	for range 3 {
		gen, err := runs.FinalizeGen(ctx, run)
		if err != nil {
			return false, err
		}
		task, opts, err := newFinalizeTask(run, target, gen)
		if err != nil {
			return false, err
		}
		if delay > 0 {
			opts = append(opts, asynq.ProcessIn(delay))
		}
		_, err = q.EnqueueContext(ctx, task, opts...)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, fmt.Errorf("enqueue finalize of run %s: %w", run, err)
		}
		insp := asynq.NewInspectorFromRedisClient(runs.rdb)
		info, ierr := insp.GetTaskInfo(Queue(target), FinalizeTaskID(run, gen))
		if ierr != nil && !errors.Is(ierr, asynq.ErrTaskNotFound) {
			return false, fmt.Errorf("inspect finalize of run %s: %w", run, ierr)
		}
		if ierr == nil && info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted {
			return false, nil // a live task will finalize the run
		}
		if err := runs.NextFinalizeGen(ctx, run, gen); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("enqueue finalize of run %s: every generation's task ID is taken", run)
}

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

// putResult writes a graph's published result.json.
func putResult(ctx context.Context, store artifacts.Store, run, graph string, res *tuner.Result) error {
	return artifacts.PutJSON(ctx, store, artifacts.GraphResultKey(run, graph), res)
}
