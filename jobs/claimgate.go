package jobs

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimGate keeps a worker's prefetch from undoing the night's order.
//
// asynq claims tasks up to the server's Concurrency (slots plus
// WorkerConfig.Prefetch) as fast as it can: a worker that sees a fresh
// queue first takes the head task and, at once, the next one too, before
// the other workers' next poll. The nightly enqueues a class's graphs
// longest first, so that next task is the second-longest of the night,
// and it would wait behind the first on this worker while other workers
// sit idle (issue 30: with 4 workers, two of the three longest graphs ran
// back to back). asynq has no hook before a claim, so the gate sits on
// the Redis client of the worker's asynq server (its own client: a hook
// sees no caller) and answers asynq's dequeue script as an empty queue
// while the gate is shut.
//
// The rule: a claim for a free slot always goes through; a claim beyond
// the slots (a prefetch) only once every slot has been taken for at least
// grace, two poll intervals, since the last claim or end. An idle worker polls every half to one and a
// half intervals (asynq's jitter), so by then any idle worker has taken
// the head of the queue for itself, and what this worker prefetches is a
// task no idle worker was there to start. A busy fleet still prefetches:
// the download of the next task overlaps the running one.
type claimGate struct {
	slots int
	grace time.Duration
	now   func() time.Time

	mu        sync.Mutex
	claimed   int       // tasks dequeued and not yet ended (graph and finalize)
	fullSince time.Time // when claimed last reached slots
}

func newClaimGate(slots int, grace time.Duration) *claimGate {
	return &claimGate{slots: slots, grace: grace, now: time.Now}
}

// open says whether a claim may go through now.
func (g *claimGate) open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.claimed < g.slots || g.now().Sub(g.fullSince) >= g.grace
}

// took records a claim.
func (g *claimGate) took() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claimed++
	if g.claimed == g.slots {
		g.fullSince = g.now()
	}
}

// ended records the end of a claimed task's handling. When a prefetched
// task takes the slot that frees, the slots are full again from now: the
// next prefetch waits its grace too, for a worker that has just freed a
// slot to claim the head of the queue first.
func (g *claimGate) ended() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claimed = max(g.claimed-1, 0)
	if g.claimed == g.slots {
		g.fullSince = g.now()
	}
}

// isDequeue reports whether cmd is asynq's dequeue script (rdb.Dequeue:
// EVALSHA or EVAL with the keys pending, paused, active, lease of one
// queue); no other script of asynq's starts with a queue's pending and
// paused keys.
func isDequeue(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 7 {
		return false
	}
	name, _ := args[0].(string)
	if !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
		return false
	}
	pending, _ := args[3].(string)
	paused, _ := args[4].(string)
	return strings.HasSuffix(pending, ":pending") && strings.HasSuffix(paused, ":paused")
}

// DialHook is the gate's redis.Hook: it does not touch dialling.
func (g *claimGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook answers a dequeue with redis.Nil (asynq's "nothing in this
// queue") while the gate is shut, and counts the claims that go through.
func (g *claimGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isDequeue(cmd) {
			return next(ctx, cmd)
		}
		if !g.open() {
			cmd.SetErr(redis.Nil)
			return redis.Nil
		}
		err := next(ctx, cmd)
		if err == nil {
			g.took()
		}
		return err
	}
}

// ProcessPipelineHook leaves pipelines alone: asynq dequeues with a script.
func (g *claimGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedClient is a client of its own for the worker's asynq server, with
// g's hook, on the same Redis as c; nil when c is of a kind it cannot
// copy (the server then claims as asynq does).
func gatedClient(c redis.UniversalClient, g *claimGate) redis.UniversalClient {
	var out redis.UniversalClient
	switch c := c.(type) {
	case *redis.Client:
		o := *c.Options()
		out = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		out = redis.NewClusterClient(&o)
	default:
		return nil
	}
	out.AddHook(g)
	return out
}
