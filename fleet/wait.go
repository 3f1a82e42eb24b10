package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// Reporter writes a nightly's morning report once every run of its plan
// is final (the report package's step; the CLI wires it).
type Reporter interface {
	Nightly(ctx context.Context, nightly string) error
}

// NoReport is a Reporter that reports nothing (tests; a build without
// the report).
type NoReport struct{}

// Nightly does nothing.
func (NoReport) Nightly(context.Context, string) error { return nil }

// Watcher is told the runs' statuses each time Wait has read them while
// some are not final: a Reporter that also implements it follows the
// night as it goes (the CLI re-checks the deadline with it).
type Watcher interface {
	Progress(ctx context.Context, plan *state.Plan, runs map[string]runstate.RunStatus)
}

// Wait follows every run of the plan until it is final, then calls the
// reporter, and returns the runs' final statuses (by run id). A carried
// entry's run is not followed: it ended done on an earlier night (Redis
// may have let its record go since), and is not in what Wait returns.
func Wait(ctx context.Context, runs *runstate.Runs, plan *state.Plan, poll time.Duration, r Reporter) (map[string]runstate.RunStatus, error) {
	if poll <= 0 {
		poll = time.Second
	}
	out := map[string]runstate.RunStatus{}
	for {
		pending := 0
		for _, e := range plan.Entries {
			if e.Run == "" || e.Carried || out[e.Run].Final() {
				continue
			}
			st, err := runs.Get(ctx, e.Run)
			if err != nil {
				return out, fmt.Errorf("follow run %s of %s on %s: %w", e.Run, e.Model, e.Target, err)
			}
			out[e.Run] = st
			if !st.Final() {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if w, ok := r.(Watcher); ok {
			w.Progress(ctx, plan, out)
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("nightly %s: %d run(s) not final yet: %w", plan.Nightly, pending, ctx.Err())
		case <-time.After(poll):
		}
	}
	if r == nil {
		r = NoReport{}
	}
	if err := r.Nightly(ctx, plan.Nightly); err != nil {
		return out, fmt.Errorf("the morning report of nightly %s: %w", plan.Nightly, err)
	}
	return out, nil
}
