package stack

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/jobs"
)

// ExpireLeases ages the lease of every task active in queue (a target
// class) to two minutes in the past, as if its worker had died that long
// ago, and fails the test when no task held a lease. Call it once the
// task's worker is dead (SIGKILLed), then start the next worker: asynq's
// recoverer runs as a server starts, so that worker takes the task back
// within seconds (retryDelay's 1 s for an expired lease, then asynq's
// 5 s check of retried tasks) rather than on the recoverer's next round,
// a minute later (a 30 s lease, recovered 30 s past its expiry).
//
// What is skipped is asynq's clock only: the recovery itself (the
// task retried with ErrLeaseExpired, the worker's retry delay, attempts
// and deaths counted, finalize once) is the same. One scenario
// (faults' TestWorkerKilledMidUpload) still waits for a real lease to
// expire, so that nothing of ours keeping a dead worker's lease alive
// goes unseen.
func ExpireLeases(t testing.TB, rdb redis.UniversalClient, queue string) {
	t.Helper()
	ctx := context.Background()
	// asynq's lease set of a queue (internal/base.LeaseKey): task id →
	// lease expiry in Unix seconds.
	key := "asynq:{" + jobs.Queue(queue) + "}:lease"
	ids, err := rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatalf("listing the leases of queue %s (%s): %v", queue, key, err)
	}
	if len(ids) == 0 {
		t.Fatalf("no task of queue %s holds a lease (%s): the dead worker held none, so nothing is to be recovered", queue, key)
	}
	past := float64(time.Now().Add(-2 * time.Minute).Unix())
	for _, id := range ids {
		// XX: only a lease still there (a task taken back meanwhile is
		// not put back).
		if err := rdb.ZAddXX(ctx, key, redis.Z{Score: past, Member: id}).Err(); err != nil {
			t.Fatalf("expiring the lease of task %s in %s: %v", id, key, err)
		}
	}
}

// ExpireLeases is ExpireLeases on the stack's Redis and queue.
func (s *Stack) ExpireLeases() {
	s.t.Helper()
	ExpireLeases(s.t, s.Client(), s.Queue)
}
