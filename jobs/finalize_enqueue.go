package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// enqueueFinalize enqueues a run's finalize task once per generation (see
// FinalizeTaskID). When the generation's ID is taken by a task that can no
// longer run (archived, or completed while the run is not final) the run
// moves to the next generation and enqueues again; a live task (pending,
// scheduled, retrying or active) makes this a no-op. Either way the run
// records its finalize as queued (runstate.Runs.FinalizeQueued), so that
// the duplicate tasks of its finished graphs stop asking for it.
func enqueueFinalize(ctx context.Context, runs *runstate.Runs, q *queueClient, run, target string) error {
	_, err := enqueueFinalizeReport(ctx, runs, q, run, target)
	return err
}

// enqueueFinalizeAt is enqueueFinalize for a caller that has just read the
// run's finalize generation (runstate.Beginning.FinalizeGen): one round
// trip less.
func enqueueFinalizeAt(ctx context.Context, runs *runstate.Runs, q *queueClient, run, target string, gen int) error {
	_, err := enqueueFinalizeAfter(ctx, runs, q, run, target, 0, &gen)
	return err
}

// enqueueFinalizeIn is enqueueFinalize with the task held back for delay.
// It does not record the finalize as queued: its caller (finalizeNow)
// finalizes the run at once, and records it only when that fails.
func enqueueFinalizeIn(ctx context.Context, runs *runstate.Runs, q *queueClient, run, target string, delay time.Duration) error {
	_, err := enqueueFinalizeAfter(ctx, runs, q, run, target, delay, nil)
	return err
}

// enqueueFinalizeReport is enqueueFinalize, telling whether it enqueued.
func enqueueFinalizeReport(ctx context.Context, runs *runstate.Runs, q *queueClient, run, target string) (bool, error) {
	return enqueueFinalizeAfter(ctx, runs, q, run, target, 0, nil)
}

// enqueueFinalizeAfter enqueues the finalize task, held back for delay,
// of generation *known when given, else of the run's generation as Redis
// has it.
func enqueueFinalizeAfter(ctx context.Context, runs *runstate.Runs, q *queueClient, run, target string, delay time.Duration, known *int) (bool, error) {
	for range 3 {
		var gen int
		if known != nil {
			gen, known = *known, nil
		} else {
			var err error
			if gen, err = runs.FinalizeGen(ctx, run); err != nil {
				return false, err
			}
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
			if delay == 0 {
				markFinalizeQueued(ctx, runs, run, gen)
			}
			return true, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, fmt.Errorf("enqueue finalize of run %s: %w", run, err)
		}
		insp := asynq.NewInspectorFromRedisClient(runs.Client())
		info, ierr := insp.GetTaskInfo(Queue(target), FinalizeTaskID(run, gen))
		if ierr != nil && !errors.Is(ierr, asynq.ErrTaskNotFound) {
			return false, fmt.Errorf("inspect finalize of run %s: %w", run, ierr)
		}
		if ierr == nil && info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted {
			if delay == 0 {
				markFinalizeQueued(ctx, runs, run, gen)
			}
			return false, nil // a live task will finalize the run
		}
		if err := runs.NextFinalizeGen(ctx, run, gen); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("enqueue finalize of run %s: every generation's task ID is taken", run)
}

// markFinalizeQueued records the run's finalize task of generation gen as
// queued. A failure is not the enqueue's: the marker only spares the
// duplicate tasks of the run's graphs a look at the queue, which they
// then take.
func markFinalizeQueued(ctx context.Context, runs *runstate.Runs, run string, gen int) {
	_ = runs.FinalizeQueued(ctx, run, gen)
}

// putResult writes a graph's published result.json.
func putResult(ctx context.Context, store artifacts.Store, run, graph string, res *tuner.Result) error {
	return artifacts.PutJSON(ctx, store, artifacts.GraphResultKey(run, graph), res)
}
