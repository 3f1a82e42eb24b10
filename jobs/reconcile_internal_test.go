package jobs

import (
	"io"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestLiveTasksReadsAsynqState: the reconciler's one HGET a graph reads
// the state asynq itself records of the graph's task (its key layout is
// asynq's, which an upgrade could change): a task enqueued is live, one
// archived or deleted is not, and a graph with no task is not.
func TestLiveTasksReadsAsynqState(t *testing.T) {
	ctx := t.Context()
	rdb, err := runstate.ConnectRedis(ctx, testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(rdb, store, io.Discard)
	q := newQueueClient(rdb)
	t.Cleanup(func() { q.Close() })
	run, target := "live-"+t.Name(), "cpu-live"
	graphs := []string{"0", "1", "2", "3"}
	for _, g := range graphs[:3] {
		task, opts, err := newGraphTask(GraphPayload{V: PayloadVersion, Run: run, Graph: g, WorkKey: "k"}, target, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueContext(ctx, task, opts...); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.ArchiveTask(Queue(target), GraphTaskID(run, "1")); err != nil {
		t.Fatal(err)
	}
	if err := insp.DeleteTask(Queue(target), GraphTaskID(run, "2")); err != nil {
		t.Fatal(err)
	}
	live, err := r.liveTasks(ctx, run, target, graphs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"0": true}
	for _, g := range graphs {
		if live[g] != want[g] {
			t.Errorf("graph %s: live %v, want %v (pending, archived, deleted, never enqueued)", g, live[g], want[g])
		}
	}
}
