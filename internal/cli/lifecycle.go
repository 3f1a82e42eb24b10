package cli

import (
	"sync"
	"time"

	"github.com/tunefleet/tunefleet/jobs"
)

// lifecycle ends a `worker run` on its own: after --max-tasks tune:graph
// tasks (it stops taking when the last one starts, and ends when it is
// over) or after --idle-exit with no task running. This is what a KEDA
// ScaledJob's pod needs: one Job per task, which no scale-down can cut
// short, and which exits when another pod took its task. It wraps the
// worker's Observer, which hears every tune:graph task start and end;
// finalize tasks are short and are not counted (an idle exit ends a pod
// that ran only those).
type lifecycle struct {
	jobs.Observer
	maxTasks int           // 0: no limit
	idle     time.Duration // 0: never

	stopTaking func() // the worker takes no more tasks
	done       func() // the worker shuts down and the command returns

	mu       sync.Mutex
	started  int
	inflight int
	idleT    *time.Timer
	ended    bool
}

func newLifecycle(obs jobs.Observer, maxTasks int, idle time.Duration, stopTaking, done func()) *lifecycle {
	return &lifecycle{Observer: obs, maxTasks: maxTasks, idle: idle, stopTaking: stopTaking, done: done}
}

// start arms the idle timer: a worker that never gets a task exits too.
func (l *lifecycle) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armIdle()
}

func (l *lifecycle) armIdle() {
	if l.idle <= 0 || l.ended {
		return
	}
	if l.idleT != nil {
		l.idleT.Stop()
	}
	l.idleT = time.AfterFunc(l.idle, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inflight == 0 {
			l.endLocked()
		}
	})
}

func (l *lifecycle) endLocked() {
	if l.ended {
		return
	}
	l.ended = true
	if l.idleT != nil {
		l.idleT.Stop()
	}
	// Never from a task handler's own stack: done shuts the worker down,
	// which waits for the handlers.
	go l.done()
}

func (l *lifecycle) TaskStarted(queue string) {
	l.Observer.TaskStarted(queue)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started++
	l.inflight++
	if l.idleT != nil {
		l.idleT.Stop()
	}
	if l.maxTasks > 0 && l.started == l.maxTasks {
		go l.stopTaking()
	}
}

func (l *lifecycle) TaskFinished(queue string, oc jobs.Outcome, class string, d time.Duration) {
	l.Observer.TaskFinished(queue, oc, class, d)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if l.inflight > 0 {
		return
	}
	if l.maxTasks > 0 && l.started >= l.maxTasks {
		l.endLocked()
		return
	}
	l.armIdle()
}
