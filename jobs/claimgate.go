package jobs

import (
	"context"
	"errors"
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
//
// The gate also keeps a worker that finds nothing from asking Redis 40
// times a second (asynq polls every PollInterval, whatever it found): a
// queue that answered empty is asked again after one interval, then two,
// four, … up to WorkerConfig.IdlePoll (a second by default, asynq's own
// interval), and at
// once again after a claim, a task's end (a slot is free), or a wake: the
// PUBLISH on WakeChannel that every enqueue of a task that can run now
// sends (queueClient). A run's first task is still taken within an
// interval of its enqueue, and an idle fleet of hundreds of workers costs
// Redis a poll per worker and queue a second instead of forty.
type claimGate struct {
	slots    int
	grace    time.Duration
	poll     time.Duration // the first wait after an empty answer
	quietMax time.Duration // the longest (IdlePoll); at most poll: no quiet
	now      func() time.Time

	mu        sync.Mutex
	claimed   int       // tasks dequeued and not yet ended (graph and finalize)
	fullSince time.Time // when claimed last reached slots
	quiet     map[string]*quietQueue
}

// quietQueue is what the gate knows of one queue that answered empty:
// asynq asks each queue in turn, so one queue's quiet must not hold
// another's claims back.
type quietQueue struct {
	wait    time.Duration // the current wait between asks
	next    time.Time     // no ask before this
	emptyAt time.Time     // its last empty answer
}

func newClaimGate(slots int, grace, poll, quietMax time.Duration) *claimGate {
	return &claimGate{slots: slots, grace: grace, poll: poll, quietMax: quietMax, now: time.Now, quiet: map[string]*quietQueue{}}
}

// open says whether a claim from queue (its pending key) may go to Redis
// now.
func (g *claimGate) open(queue string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if q := g.quiet[queue]; q != nil && now.Before(q.next) {
		return false
	}
	return g.claimed < g.slots || now.Sub(g.fullSince) >= g.grace
}

// empty records that queue answered empty: it is asked again after a wait
// twice the last (one asynq poll round asks it once; a round within half
// an interval of the last empty answer is the same round).
func (g *claimGate) empty(queue string) {
	if g.quietMax <= g.poll {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	q := g.quiet[queue]
	if q == nil {
		q = &quietQueue{}
		g.quiet[queue] = q
	}
	if q.emptyAt.IsZero() || now.Sub(q.emptyAt) >= g.poll/2 {
		q.wait = min(max(2*q.wait, g.poll), g.quietMax)
	}
	q.emptyAt, q.next = now, now.Add(q.wait)
}

// wake ends every queue's quiet: the next poll asks Redis.
func (g *claimGate) wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.quiet)
}

// took records a claim.
func (g *claimGate) took() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claimed++
	if g.claimed == g.slots {
		g.fullSince = g.now()
	}
	clear(g.quiet)
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
	clear(g.quiet)
}

// dequeueOf returns the pending key of the queue cmd dequeues from when
// cmd is asynq's dequeue script (rdb.Dequeue: EVALSHA or EVAL with the
// keys pending, paused, active, lease of one queue), else "": no other
// script of asynq's starts with a queue's pending and paused keys.
func dequeueOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 7 {
		return ""
	}
	name, _ := args[0].(string)
	if !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
		return ""
	}
	pending, _ := args[3].(string)
	paused, _ := args[4].(string)
	if strings.HasSuffix(pending, ":pending") && strings.HasSuffix(paused, ":paused") {
		return pending
	}
	return ""
}

// isDequeue reports whether cmd is asynq's dequeue script.
func isDequeue(cmd redis.Cmder) bool { return dequeueOf(cmd) != "" }

// DialHook is the gate's redis.Hook: it does not touch dialling.
func (g *claimGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

// ProcessHook answers a dequeue with redis.Nil (asynq's "nothing in this
// queue") while the gate is shut, counts the claims that go through, and
// notes the queues that answered empty.
func (g *claimGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		queue := dequeueOf(cmd)
		if queue == "" {
			return next(ctx, cmd)
		}
		if !g.open(queue) {
			cmd.SetErr(redis.Nil)
			return redis.Nil
		}
		err := next(ctx, cmd)
		switch {
		case err == nil:
			g.took()
		case errors.Is(err, redis.Nil):
			g.empty(queue)
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
// copy (the server then claims as asynq does). When c names its
// connections (Options.ClientName), the server's are named the same with
// "/asynq" after it: CLIENT LIST, and a benchmark's tally of commands by
// sender, tell asynq's polls from the worker's bookkeeping.
func gatedClient(c redis.UniversalClient, g *claimGate) redis.UniversalClient {
	var out redis.UniversalClient
	switch c := c.(type) {
	case *redis.Client:
		o := *c.Options()
		if o.ClientName != "" {
			o.ClientName += "/asynq"
		}
		out = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		if o.ClientName != "" {
			o.ClientName += "/asynq"
		}
		out = redis.NewClusterClient(&o)
	default:
		return nil
	}
	out.AddHook(g)
	return out
}
