package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// TaskInfo is what asynq records of a graph's task: whether it waits,
// runs or waits to be retried, how often asynq retried it and the error
// of its last failure. It complements the attempts Redis counts for the
// graph (GraphStatus.Attempts, LastError): asynq's count is the task's
// own, which a hand-back to another platform does not raise and a
// re-enqueued task starts again from zero.
type TaskInfo struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// State is asynq's: pending, active, scheduled, retry, archived,
	// completed or aggregating.
	State    string `json:"state"`
	Retried  int    `json:"retried"`
	MaxRetry int    `json:"max_retry"` // in effect unlimited: retries are budgeted by time
	LastErr  string `json:"last_err,omitempty"`
	// LastFailedAt is when the last failure happened; NextProcessAt when
	// asynq will hand the task to a worker next (retry and scheduled).
	LastFailedAt  time.Time `json:"last_failed_at,omitzero"`
	NextProcessAt time.Time `json:"next_process_at,omitzero"`
}

// AddTasks fills GraphStatus.Task of every pending graph of st from asynq,
// by the graph's deterministic task id in the run's queue. A graph whose
// task asynq no longer has (deleted, or lost with a Redis that forgot it)
// is left without; the reconciler re-enqueues those.
func (r *Runs) AddTasks(ctx context.Context, st *RunStatus) error {
	insp := asynq.NewInspectorFromRedisClient(r.rdb)
	queue := Queue(st.Target)
	for name, gs := range st.Graphs {
		if gs.Status != GraphPending {
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
	return nil
}

func taskInfoOf(info *asynq.TaskInfo) *TaskInfo {
	return &TaskInfo{
		ID: info.ID, Queue: info.Queue, State: info.State.String(), Retried: info.Retried, MaxRetry: info.MaxRetry,
		LastErr: info.LastErr, LastFailedAt: info.LastFailedAt, NextProcessAt: info.NextProcessAt,
	}
}
