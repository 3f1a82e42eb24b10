package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// WakeChannel is the Redis pub/sub channel an enqueue of a task that can
// run now is announced on (the message is the queue's name). Workers
// subscribe to it, so that one whose claim gate has quieted its polls
// (claimGate) asks for work at its next poll instead of after its quiet
// wait. A wake is a hint: a worker that misses one asks within a second
// anyway.
const WakeChannel = "tunefleet:wake"

// wakeEvery bounds the wakes one client sends per queue: a submit of a
// thousand graphs sends one, not a thousand. A worker woken by the first
// keeps asking at its poll interval for as long as it finds tasks, so
// the tasks enqueued after it need no wake of their own.
const wakeEvery = 100 * time.Millisecond

// queueClient is asynq's client with the wake: EnqueueContext announces
// a task that can run now on WakeChannel (at most once per queue per
// wakeEvery), which a worker's claim gate hears.
type queueClient struct {
	*asynq.Client
	rdb redis.UniversalClient

	mu   sync.Mutex
	last map[string]time.Time // per queue, the last wake sent
}

func newQueueClient(rdb redis.UniversalClient) *queueClient {
	return &queueClient{Client: asynq.NewClientFromRedisClient(rdb), rdb: rdb, last: map[string]time.Time{}}
}

// EnqueueContext enqueues as asynq does, then wakes the task's queue when
// the task can run now. A wake that fails is not an enqueue that failed:
// the workers find the task at their next ask.
func (c *queueClient) EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	info, err := c.Client.EnqueueContext(ctx, task, opts...)
	if err != nil || info.State != asynq.TaskStatePending {
		return info, err
	}
	c.mu.Lock()
	now := time.Now()
	due := now.Sub(c.last[info.Queue]) >= wakeEvery
	if due {
		c.last[info.Queue] = now
	}
	c.mu.Unlock()
	if due {
		c.rdb.Publish(ctx, WakeChannel, info.Queue)
	}
	return info, nil
}

// wakeHealthCheck is how long the wake subscription may hear nothing
// before go-redis PINGs it to find a connection that died without a word
// (go-redis's default is 3 s: a PING every 3 s of every idle worker, a
// third of a command a second each). A wake is a hint, and a worker that
// misses some still asks every IdlePoll.
const wakeHealthCheck = 30 * time.Second

// listenForWakes calls wake for every message on WakeChannel until ctx
// ends; go-redis resubscribes by itself after a lost connection.
func listenForWakes(ctx context.Context, rdb redis.UniversalClient, wake func()) {
	sub := rdb.Subscribe(ctx, WakeChannel)
	defer sub.Close()
	ch := sub.Channel(redis.WithChannelHealthCheckInterval(wakeHealthCheck))
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			wake()
		}
	}
}
