package jobs

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClaimGate: a claim for a free slot goes through at once; a claim
// beyond the slots (a prefetch) only once every slot has been taken for
// the grace, counted again from a task's end that leaves them full.
func TestClaimGate(t *testing.T) {
	type step struct {
		op   string // took, ended, wait (advance the clock by the grace's tenths in n), open, shut
		n    int
		what string
	}
	for _, tc := range []struct {
		name  string
		slots int
		steps []step
	}{
		{"a free slot is claimed at once", 1, []step{{op: "open", what: "idle worker"}}},
		{"no prefetch right after the slots fill", 1, []step{{op: "took"}, {op: "shut", what: "just full"}, {op: "wait", n: 9}, {op: "shut", what: "before the grace"}, {op: "wait", n: 1}, {op: "open", what: "after the grace"}}},
		{"two slots: the second is claimed at once", 2, []step{{op: "took"}, {op: "open", what: "one slot free"}, {op: "took"}, {op: "shut", what: "both just taken"}}},
		{"a task's end that leaves the slots full starts the grace again", 1, []step{{op: "took"}, {op: "wait", n: 10}, {op: "took"}, {op: "ended"}, {op: "shut", what: "the prefetched task took the slot just now"}, {op: "wait", n: 10}, {op: "open", what: "after the grace"}}},
		{"a free slot again: at once", 1, []step{{op: "took"}, {op: "ended"}, {op: "open", what: "the slot is free"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			g := newClaimGate(tc.slots, time.Second, 500*time.Millisecond, 0)
			g.now = func() time.Time { return now }
			for i, s := range tc.steps {
				switch s.op {
				case "took":
					g.took()
				case "ended":
					g.ended()
				case "wait":
					now = now.Add(time.Duration(s.n) * 100 * time.Millisecond)
				case "open", "shut":
					if got := g.open("q"); got != (s.op == "open") {
						t.Errorf("step %d (%s): open %v, want %v", i, s.what, got, s.op == "open")
					}
				}
			}
		})
	}
}

// TestIsDequeue: the gate holds back asynq's dequeue script and nothing
// else (a requeue starts with the active key, an enqueue with the task's).
func TestIsDequeue(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []any
		want bool
	}{
		{"dequeue by sha", []any{"evalsha", "abc", 4, "asynq:{cpu}:pending", "asynq:{cpu}:paused", "asynq:{cpu}:active", "asynq:{cpu}:lease", 1, "asynq:{cpu}:t:"}, true},
		{"dequeue by script", []any{"eval", "script", 4, "asynq:{cpu}:pending", "asynq:{cpu}:paused", "asynq:{cpu}:active", "asynq:{cpu}:lease", 1, "asynq:{cpu}:t:"}, true},
		{"requeue", []any{"evalsha", "abc", 4, "asynq:{cpu}:active", "asynq:{cpu}:lease", "asynq:{cpu}:pending", "asynq:{cpu}:t:x", "x"}, false},
		{"enqueue", []any{"evalsha", "abc", 2, "asynq:{cpu}:t:x", "asynq:{cpu}:pending", "msg", "x", 1}, false},
		{"a plain command", []any{"llen", "asynq:{cpu}:pending"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isDequeue(redis.NewCmd(t.Context(), tc.args...)); got != tc.want {
				t.Errorf("isDequeue(%v) = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

// TestClaimGateQuietsEmptyQueues: a queue that answered empty is asked
// again after one poll interval, then two, four, … up to the idle poll; a
// second queue is asked on its own schedule; a claim, a task's end and a
// wake each end the quiet; an idle poll at most the poll interval asks at
// every poll.
func TestClaimGateQuietsEmptyQueues(t *testing.T) {
	const poll = 100 * time.Millisecond
	type step struct {
		op    string // empty (queue answered empty), wait (ms), open, shut, took, ended, wake
		queue string
		ms    int
	}
	for _, tc := range []struct {
		name     string
		idlePoll time.Duration
		steps    []step
	}{
		{"the wait doubles from the poll interval to the idle poll", 400 * time.Millisecond, []step{
			{op: "empty", queue: "a"}, {op: "shut", queue: "a"}, {op: "wait", ms: 100}, {op: "open", queue: "a"},
			{op: "empty", queue: "a"}, {op: "wait", ms: 199}, {op: "shut", queue: "a"}, {op: "wait", ms: 1}, {op: "open", queue: "a"},
			{op: "empty", queue: "a"}, {op: "wait", ms: 399}, {op: "shut", queue: "a"}, {op: "wait", ms: 1}, {op: "open", queue: "a"},
			{op: "empty", queue: "a"}, {op: "wait", ms: 399}, {op: "shut", queue: "a"}, {op: "wait", ms: 1}, {op: "open", queue: "a", ms: 400},
		}},
		{"one round's empty answers count once", time.Second, []step{
			{op: "empty", queue: "a"}, {op: "empty", queue: "a"}, {op: "wait", ms: 100}, {op: "open", queue: "a"},
		}},
		{"each queue has its own quiet", time.Second, []step{
			{op: "empty", queue: "a"}, {op: "shut", queue: "a"}, {op: "open", queue: "b"},
		}},
		{"a wake ends it", time.Second, []step{
			{op: "empty", queue: "a"}, {op: "wait", ms: 100}, {op: "empty", queue: "a"}, {op: "shut", queue: "a"}, {op: "wake"}, {op: "open", queue: "a"},
			{op: "empty", queue: "a"}, {op: "wait", ms: 99}, {op: "shut", queue: "a"}, {op: "wait", ms: 1}, {op: "open", queue: "a"},
		}},
		{"a claim ends it", time.Second, []step{{op: "empty", queue: "a"}, {op: "shut", queue: "a"}, {op: "took"}, {op: "open", queue: "a"}}},
		{"a task's end ends it", time.Second, []step{{op: "took"}, {op: "wait", ms: 1000}, {op: "empty", queue: "a"}, {op: "shut", queue: "a"}, {op: "ended"}, {op: "open", queue: "a"}}},
		{"an idle poll at most the interval: every poll asks", poll, []step{{op: "empty", queue: "a"}, {op: "open", queue: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			g := newClaimGate(2, 2*poll, poll, tc.idlePoll) // two slots: one claim leaves one free
			g.now = func() time.Time { return now }
			for i, s := range tc.steps {
				switch s.op {
				case "empty":
					g.empty(s.queue)
				case "took":
					g.took()
				case "ended":
					g.ended()
				case "wake":
					g.wake()
				case "wait":
					now = now.Add(time.Duration(s.ms) * time.Millisecond)
				case "open", "shut":
					if got := g.open(s.queue); got != (s.op == "open") {
						t.Errorf("step %d: queue %s open %v, want %v", i, s.queue, got, s.op == "open")
					}
				}
			}
		})
	}
}
