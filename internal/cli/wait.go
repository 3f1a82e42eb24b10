package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// redisBlip is how long following a run rides out failed polls (a Redis
// restart, a failover, a network blip) before giving up.
const redisBlip = time.Minute

// errWaitTimeout says --timeout ran out while the run was still going.
var errWaitTimeout = errors.New("timed out")

// follower polls a run until it is final, showing progress whenever it
// changes: on live, a terminal, as its table redrawn in place, else as
// plain lines on out (runLines). A poll that fails is retried for up to
// redisBlip; a run Redis lost is rebuilt from store (when given).
type follower struct {
	runs    *runstate.Runs
	store   artifacts.Store // may be nil
	out     io.Writer       // notices, and the lines without live
	live    *liveTable      // may be nil
	render  func(runstate.RunStatus) string
	tasks   bool          // read each pending graph's task from asynq too (status)
	timeout time.Duration // 0: none
	every   time.Duration
	// stream, when set, hears the run each time what it says changes
	// (status --watch -o jsonl), instead of lines on out.
	stream func(runstate.RunStatus) error
}

func (f follower) wait(ctx context.Context, run string) (runstate.RunStatus, error) {
	if f.every == 0 {
		f.every = 200 * time.Millisecond
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, f.timeout, errWaitTimeout)
		defer cancel()
	}
	lines := &runLines{w: f.out}
	var failingSince time.Time
	// st is the run as last read: a poll cut short by the timeout returns
	// an empty status, which must not be what the timeout message shows.
	var st runstate.RunStatus
	tick := time.NewTicker(f.every)
	defer tick.Stop()
	for {
		got, err := f.get(ctx, run)
		switch {
		case err == nil:
			st = got
			if !failingSince.IsZero() {
				f.notef("run %s: Redis answers again\n", run)
			}
			failingSince = time.Time{}
			switch {
			case f.stream != nil:
				if err := f.stream(st); err != nil {
					return st, err
				}
			case f.live != nil:
				f.live.draw(f.render(st))
			default:
				lines.update(st)
			}
			if st.Final() {
				return st, nil
			}
		case errors.Is(err, runstate.ErrNoRun) || ctx.Err() != nil:
			return st, f.ended(ctx, run, st, err)
		default:
			if failingSince.IsZero() {
				failingSince = time.Now()
				f.notef("run %s: cannot read its status (%v); retrying for up to %s\n", run, err, redisBlip)
			} else if time.Since(failingSince) > redisBlip {
				return st, fmt.Errorf("following run %s: Redis failed for over %s: %w", run, redisBlip, err)
			}
		}
		select {
		case <-ctx.Done():
			return st, f.ended(ctx, run, st, ctx.Err())
		case <-tick.C:
		}
	}
}

// get reads the run (and its pending tasks, when asked).
func (f follower) get(ctx context.Context, run string) (runstate.RunStatus, error) {
	w := f.out
	if f.live != nil {
		w = noticeWriter{f}
	}
	st, err := getRun(ctx, f.runs, f.store, run, w)
	if err == nil && f.tasks {
		err = jobs.AddTasks(ctx, f.runs, &st)
	}
	return st, err
}

// notef says something that is not progress (Redis failing, answering
// again); a live table is then drawn anew below it.
func (f follower) notef(format string, args ...any) {
	fmt.Fprintf(f.out, format, args...)
	if f.live != nil {
		f.live.forget()
	}
}

// noticeWriter writes through follower.notef.
type noticeWriter struct{ f follower }

func (n noticeWriter) Write(p []byte) (int, error) {
	n.f.notef("%s", p)
	return len(p), nil
}

func (f follower) ended(ctx context.Context, run string, st runstate.RunStatus, err error) error {
	if context.Cause(ctx) != errWaitTimeout {
		return err
	}
	// The timeout may have cut the last poll (or the first) short: read
	// the run once more, briefly, so the message says where it really is.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if now, gerr := f.runs.Get(rctx, run); gerr == nil {
		st = now
	}
	counts := fmt.Sprintf("%d/%d graph(s) finished", st.Done+st.Failed+st.Cancelled, st.Total)
	switch {
	case st.Final():
		return failedErr(fmt.Errorf("run %s: %w after %s, as it ended %s (%s): see `producer status %s`", run, errWaitTimeout, f.timeout, st.Status, counts, run))
	case st.Status == "":
		counts = "its status unknown: Redis did not answer"
	default:
		counts = "still " + st.Status + " (" + counts + ")"
	}
	return failedErr(fmt.Errorf("run %s: %w after %s, %s; it goes on: follow it with `producer status %s --watch`",
		run, errWaitTimeout, f.timeout, counts, run))
}

// getRun reads a run's record; one Redis lost is rebuilt from store (when
// given), saying so on w: the store is the record of truth.
func getRun(ctx context.Context, runs *runstate.Runs, store artifacts.Store, run string, w io.Writer) (runstate.RunStatus, error) {
	st, err := runs.Get(ctx, run)
	if !errors.Is(err, runstate.ErrNoRun) || store == nil {
		return st, err
	}
	restored, rerr := jobs.Restore(ctx, runs, store, run)
	if rerr != nil {
		return st, rerr
	}
	if restored {
		fmt.Fprintf(w, "run %s: Redis had lost it; its record was rebuilt from %s (the workers' reconciler re-enqueues its pending graphs, or run `producer reconcile %s`)\n", run, store, run)
	}
	return runs.Get(ctx, run)
}
