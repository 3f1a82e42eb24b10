package jobs

import (
	"context"
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
// free would only hand the task back.
type slotPool struct {
	mu      sync.Mutex
	free    []slot
	changed chan struct{} // closed (and replaced) when a slot comes back
}

func newSlotPool(slots []slot) *slotPool {
	return &slotPool{free: append([]slot(nil), slots...), changed: make(chan struct{})}
}

// take waits for a free slot of platform ("" for any) until ctx ends.
func (p *slotPool) take(ctx context.Context, platform string) (slot, error) {
	for {
		p.mu.Lock()
		for i, s := range p.free {
			if platform == "" || s.platform == platform {
				p.free = append(p.free[:i], p.free[i+1:]...)
				p.mu.Unlock()
				return s, nil
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return slot{}, ctx.Err()
		}
	}
}

// put returns a slot and wakes the waiting tasks.
func (p *slotPool) put(s slot) {
	p.mu.Lock()
	p.free = append(p.free, s)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
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
