package jobs

import (
	"context"
	"errors"
	"sync"
)

// slot is where one task runs: a GPU (pinned with its environment) or the
// CPU, with the platform key its engines and timings belong to.
type slot struct {
	platform string
	env      []string
}

// slotPool hands out a worker's slots. A task may ask for a slot of one
// platform: on a machine with GPUs of several platforms, a run already
// bound to one of them must be tuned on it, and taking whichever slot is
// free would only hand the task back. Few tasks may wait for one platform
// (take's limit), so that tasks of the other platforms still get served,
// and a task that takes any slot leaves a returned slot to the tasks that
// wait for its platform.
type slotPool struct {
	mu      sync.Mutex
	free    []slot
	waiting map[string]int // tasks waiting, by the platform they want ("" for any)
	changed chan struct{}  // closed (and replaced) when a slot comes back
	size    int            // slots, free or taken
	// observe, if set, hears the number of busy slots on every change
	// (with mu held: it must be quick).
	observe func(busy int)
}

// errSlotsBusy says a task did not wait for a slot: as many tasks as may
// wait for its platform already do. Its task goes back to the queue.
var errSlotsBusy = errors.New("every slot of the run's platform is busy, and other tasks wait for one")

func newSlotPool(slots []slot) *slotPool {
	return &slotPool{free: append([]slot(nil), slots...), waiting: map[string]int{}, changed: make(chan struct{}), size: len(slots)}
}

// take waits for a free slot of platform ("" for any) until ctx ends. When
// none is free and limit tasks wait for platform already, it returns
// errSlotsBusy at once.
func (p *slotPool) take(ctx context.Context, platform string, limit int) (slot, error) {
	return p.takeOr(ctx, platform, limit, nil)
}

// takeOr is take, calling waiting (when not nil, without the pool's lock)
// once if the task has to wait for a slot: a prefetched task says so.
func (p *slotPool) takeOr(ctx context.Context, platform string, limit int, waiting func()) (slot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	counted := false
	defer func() {
		if counted {
			p.waiting[platform]--
		}
	}()
	for {
		for i, s := range p.free {
			// A task that takes any slot leaves those that others wait for.
			if s.platform == platform || platform == "" && p.waiting[s.platform] == 0 {
				p.free = append(p.free[:i], p.free[i+1:]...)
				p.changedBusy()
				return s, nil
			}
		}
		if !counted {
			if p.waiting[platform] >= limit {
				return slot{}, errSlotsBusy
			}
			p.waiting[platform]++
			counted = true
			if waiting != nil {
				p.mu.Unlock()
				waiting()
				p.mu.Lock()
				continue // a slot may have come back meanwhile
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-ctx.Done():
			p.mu.Lock()
			// A slot this task left to others may be free: let the tasks
			// that take any look again.
			p.waiting[platform]--
			counted = false
			p.broadcast()
			return slot{}, ctx.Err()
		}
	}
}

// full reports whether no slot of platform ("" for any) is free: a task
// taken now is taken ahead of a slot (prefetched).
func (p *slotPool) full(platform string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.free {
		if platform == "" || s.platform == platform {
			return false
		}
	}
	return true
}

// put returns a slot and wakes the waiting tasks.
func (p *slotPool) put(s slot) {
	p.mu.Lock()
	p.free = append(p.free, s)
	p.changedBusy()
	p.broadcast()
	p.mu.Unlock()
}

// changedBusy tells observe; p.mu is held.
func (p *slotPool) changedBusy() {
	if p.observe != nil {
		p.observe(p.size - len(p.free))
	}
}

// broadcast wakes every waiting task; p.mu is held.
func (p *slotPool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// has reports whether any slot, free or taken, is of platform.
func has(slots []slot, platform string) bool {
	for _, s := range slots {
		if s.platform == platform {
			return true
		}
	}
	return false
}
