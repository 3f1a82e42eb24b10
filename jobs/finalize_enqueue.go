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
// scheduled, retrying or active) makes this a no-op.
func enqueueFinalize(ctx context.Context, runs *runstate.Runs, q *asynq.Client, run, target string) error {
	_, err := enqueueFinalizeReport(ctx, runs, q, run, target)
	return err
}

// enqueueFinalizeIn is enqueueFinalize with the task held back for delay.
func enqueueFinalizeIn(ctx context.Context, runs *runstate.Runs, q *asynq.Client, run, target string, delay time.Duration) error {
	_, err := enqueueFinalizeAfter(ctx, runs, q, run, target, delay)
	return err
}

// enqueueFinalizeReport is enqueueFinalize, telling whether it enqueued.
func enqueueFinalizeReport(ctx context.Context, runs *runstate.Runs, q *asynq.Client, run, target string) (bool, error) {
	return enqueueFinalizeAfter(ctx, runs, q, run, target, 0)
}

func enqueueFinalizeAfter(ctx context.Context, runs *runstate.Runs, q *asynq.Client, run, target string, delay time.Duration) (bool, error) {
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
		insp := asynq.NewInspectorFromRedisClient(runs.Client())
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

// putResult writes a graph's published result.json.
func putResult(ctx context.Context, store artifacts.Store, run, graph string, res *tuner.Result) error {
	return artifacts.PutJSON(ctx, store, artifacts.GraphResultKey(run, graph), res)
}
