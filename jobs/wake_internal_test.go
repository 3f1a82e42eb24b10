package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestEnqueueWakesQuietWorkers: a gate whose queue has gone quiet (its
// clock stands still, so only a wake can open it) stays shut through the
// enqueue of a task held back for later, and opens once a task that can
// run now is enqueued: the enqueue's PUBLISH on WakeChannel reaches the
// worker's listener through a real redis-server.
func TestEnqueueWakesQuietWorkers(t *testing.T) {
	ctx := t.Context()
	rdb, err := runstate.ConnectRedis(ctx, testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	const queue = "asynq:{cpu}:pending"
	g := newClaimGate(1, 0, 10*time.Millisecond, time.Hour)
	stopped := time.Unix(0, 0)
	g.now = func() time.Time { return stopped }
	g.empty(queue)
	if g.open(queue) {
		t.Fatal("a queue that answered empty is asked again before its wait")
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); listenForWakes(lctx, rdb, g.wake) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the worker's subscription", func() bool {
		n, err := rdb.PubSubNumSub(ctx, WakeChannel).Result()
		return err == nil && n[WakeChannel] == 1
	})

	qc := newQueueClient(rdb)
	t.Cleanup(func() { qc.Close() })
	if _, err := qc.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue("cpu"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, sent := qc.last["cpu"]; sent {
		t.Fatal("a task held back for an hour woke the workers")
	}
	if _, err := qc.EnqueueContext(ctx, asynq.NewTask("t", nil), asynq.Queue("cpu")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the wake to open the quiet queue", func() bool { return g.open(queue) })
}

// eventually polls cond until it holds; a minute without is a failure (a
// hang, not a speed limit).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}
