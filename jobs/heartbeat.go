package jobs

import (
	"context"
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
)

// DefaultHeartbeat is how often a worker renews its registration.
const DefaultHeartbeat = 30 * time.Second

// heartbeat registers the worker's platforms for its queues now and every
// cfg.Heartbeat until ctx ends. A failed registration is logged and
// retried at the next beat: the registry only makes nightlies cheaper.
func (w *Worker) heartbeat(ctx context.Context) {
	platforms := w.platforms()
	beat := func() {
		if err := w.register(ctx, platforms); err != nil && ctx.Err() == nil {
			w.warnf("%v (trying again in %s)", err, w.cfg.Heartbeat)
		}
	}
	tick := time.NewTicker(w.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			beat()
		}
	}
}

// register records the worker's platforms and task slots for its queues.
func (w *Worker) register(ctx context.Context, platforms []string) error {
	now := time.Now()
	if err := runstate.RegisterPlatforms(ctx, w.cfg.Redis, w.cfg.Queues, platforms, now); err != nil {
		return err
	}
	return runstate.RegisterSlots(ctx, w.cfg.Redis, w.id, w.cfg.Queues, len(w.all), now)
}

// platforms are the distinct platform keys of the worker's slots.
func (w *Worker) platforms() []string {
	var out []string
	for _, sl := range w.all {
		if !slices.Contains(out, sl.platform) {
			out = append(out, sl.platform)
		}
	}
	return out
}
