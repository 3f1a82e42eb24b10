package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
)

// specCache keeps the run records (run.json) a worker has read, so that a
// task costs the same whatever its run's size: run.json names every graph's
// files and declaration, and decoding it for each of a run's N tasks made a
// run cost O(N²) (26 ms per task at 1,000 graphs). run.json is written once,
// before the run is recorded, and never changed, so a cached copy cannot go
// stale. Concurrent tasks of one run share one read.
type specCache struct {
	store artifacts.Store
	max   int

	mu    sync.Mutex
	specs map[string]*specEntry
	order []string // oldest first, for eviction
}

type specEntry struct {
	ready chan struct{}
	spec  *RunSpec
	err   error
}

func newSpecCache(store artifacts.Store, max int) *specCache {
	return &specCache{store: store, max: max, specs: map[string]*specEntry{}}
}

// get returns run's record; callers must not change it. A run without
// run.json is a permanent error (SkipRetry); other errors are not cached.
func (c *specCache) get(ctx context.Context, run string) (*RunSpec, error) {
	c.mu.Lock()
	e, ok := c.specs[run]
	if !ok {
		e = &specEntry{ready: make(chan struct{})}
		c.specs[run] = e
		c.order = append(c.order, run)
		for len(c.order) > c.max {
			delete(c.specs, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e.spec, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var spec RunSpec
	err := artifacts.GetJSON(ctx, c.store, artifacts.RunKey(run), &spec)
	switch {
	case err == nil:
		e.spec = &spec
	case errors.Is(err, artifacts.ErrNotExist):
		err = fmt.Errorf("run %s has no run.json in %s: %w", run, c.store, asynq.SkipRetry)
	}
	e.err = err
	if err != nil {
		c.forget(run, e) // a failed read is tried again by the next task
	}
	close(e.ready)
	return e.spec, err
}

func (c *specCache) forget(run string, e *specEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.specs[run] == e {
		delete(c.specs, run)
		for i, r := range c.order {
			if r == run {
				c.order = append(c.order[:i], c.order[i+1:]...)
				break
			}
		}
	}
}
