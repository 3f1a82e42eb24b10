package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// Liveness is what a process supervisor (the kubelet's liveness probe) may
// restart a worker for: a task handler still running well past its
// deadline, which asynq has cancelled its context at, so a handler that
// does not return is wedged (a child it cannot kill, a lock it never gets).
// Nothing outside the process counts: a Redis or store outage makes a
// worker unready, never dead, because the build it runs finishes on its own
// and its result lands once Redis is back; killing it would lose the build
// (issue 34: a six-probe liveness window killed every build over a Redis
// restart).

// inFlight tracks the tasks whose handlers run, with their deadlines.
type inFlight struct {
	mu    sync.Mutex
	next  int
	tasks map[int]flight
}

type flight struct {
	typ, id         string
	start, deadline time.Time
}

// track is an asynq middleware that records each task while its handler
// runs.
func (f *inFlight) track(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		fl := flight{typ: t.Type(), start: time.Now()}
		fl.id, _ = asynq.GetTaskID(ctx)
		fl.deadline, _ = ctx.Deadline()
		f.mu.Lock()
		if f.tasks == nil {
			f.tasks = map[int]flight{}
		}
		n := f.next
		f.next++
		f.tasks[n] = fl
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.tasks, n)
			f.mu.Unlock()
		}()
		return h.ProcessTask(ctx, t)
	})
}

// wedged is the first task that has run more than budget past its
// deadline at now, as an error naming it; nil when there is none.
func (f *inFlight) wedged(now time.Time, budget time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.tasks {
		if fl.deadline.IsZero() || now.Sub(fl.deadline) <= budget {
			continue
		}
		return fmt.Errorf("task %s (%s) started %s ago and is %s past its deadline: its handler does not return",
			fl.id, fl.typ, now.Sub(fl.start).Round(time.Second), now.Sub(fl.deadline).Round(time.Second))
	}
	return nil
}

// Wedged reports, for a liveness probe, a task whose handler has run more
// than budget past its deadline (nil: the worker is alive). It never asks
// Redis or the store: Ping is for readiness.
func (w *Worker) Wedged(budget time.Duration) error {
	return w.flights.wedged(time.Now(), budget)
}
