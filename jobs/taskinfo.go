package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/tunefleet/tunefleet/runstate"
)

// AddTasks fills GraphStatus.Task of every pending graph of st from asynq,
// by the graph's deterministic task id in the run's queue, and derives
// each graph's State again with it. A graph whose
// task asynq no longer has (deleted, or lost with a Redis that forgot it)
// is left without; the reconciler re-enqueues those.
func AddTasks(ctx context.Context, runs *runstate.Runs, st *runstate.RunStatus) error {
	insp := asynq.NewInspectorFromRedisClient(runs.Client())
	queue := Queue(st.Target)
	for name, gs := range st.Graphs {
		if gs.Status != runstate.GraphPending {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := insp.GetTaskInfo(queue, GraphTaskID(st.Run, name))
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("run %s graph %s: read its task from asynq: %w", st.Run, name, err)
		}
		gs.Task = taskInfoOf(info)
		st.Graphs[name] = gs
	}
	// The one view of each graph, now that its task is known: a task
	// asynq calls active whose worker waits for a slot is prefetched, not
	// running (runstate.RunStatus.Derive).
	st.Derive()
	return nil
}

func taskInfoOf(info *asynq.TaskInfo) *runstate.TaskInfo {
	return &runstate.TaskInfo{
		ID: info.ID, Queue: info.Queue, State: info.State.String(), Retried: info.Retried, MaxRetry: info.MaxRetry,
		LastErr: info.LastErr, LastFailedAt: info.LastFailedAt, NextProcessAt: info.NextProcessAt,
	}
}
