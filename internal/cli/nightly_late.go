package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"

	"github.com/tunefleet/tunefleet/internal/webhook"
)

// lateCheckEvery is how often `nightly --wait` re-checks a night's
// deadline: often enough to warn minutes after a night falls behind, and
// a few Redis reads each time.
const lateCheckEvery = 30 * time.Second

// deadlineWatch re-checks, while `nightly --wait` follows a night planned
// to fit before its --deadline, whether what is left still fits on the
// workers there are now, and warns once (stderr and the webhook) when it
// no longer does. Several producers following one night warn once between
// them: the warning is claimed in Redis as the morning report's webhook is.
type deadlineWatch struct {
	morningReport
	errOut io.Writer
	every  time.Duration
	now    func() time.Time
	next   time.Time
	done   bool
}

func newDeadlineWatch(m morningReport, errOut io.Writer) *deadlineWatch {
	return &deadlineWatch{morningReport: m, errOut: errOut, every: lateCheckEvery, now: time.Now}
}

// Progress is called by fleet.Wait each time it has read the runs.
func (w *deadlineWatch) Progress(ctx context.Context, plan *state.Plan, runs map[string]runstate.RunStatus) {
	est := plan.Estimate
	if w.done || est == nil || est.Deadline == nil || len(est.Short) > 0 {
		return // no deadline, or DeadlineWarning said it at submit
	}
	now := w.now()
	if w.next.IsZero() {
		w.next = now.Add(w.every) // the plan has just been estimated
	}
	if now.Before(w.next) {
		return
	}
	w.next = now.Add(w.every)
	workers, err := nightWorkers(ctx, w.rdb, est, now)
	if err != nil {
		fmt.Fprintf(w.errOut, "warning: re-check of nightly %s's deadline: %v\n", plan.Nightly, err)
		return
	}
	msg := fleet.LateWarning(plan, fleet.Reestimate(plan, runs, workers, now))
	if msg == "" {
		return
	}
	w.done = true
	if w.rdb == nil {
		warnNight(ctx, w.errOut, plan.Notify, msg, w.policy)
		return
	}
	key := "late:" + plan.Nightly
	claim := report.RedisClaimer{RDB: w.rdb}
	if ok, err := claim.Claim(ctx, key); err != nil || !ok {
		return // another producer following this night warns
	}
	if warnNight(ctx, w.errOut, plan.Notify, msg, w.policy) {
		_ = claim.Done(ctx, key)
	} else {
		_ = claim.Release(ctx, key) // the webhook failed: another producer may try
	}
}

// warnNight says a warning about a night on stderr and posts it to the
// night's webhook, if it has one, and reports whether the post went (true
// without a webhook): the deadline warning at submit and the late one
// while --wait follows the night.
func warnNight(ctx context.Context, errOut io.Writer, notify, msg string, p webhook.Policy) bool {
	fmt.Fprintf(errOut, "warning: %s\n", msg)
	if notify == "" {
		return true
	}
	// Tried for report.DefaultWarnRetryFor, not the report's window: the
	// night's wait stops for it.
	if err := report.Warn(ctx, notify, "*tunefleet*: "+msg, webhook.Policy{Timeout: p.Timeout}); err != nil {
		fmt.Fprintf(errOut, "warning: the webhook of that warning: %v\n", err)
		return false
	}
	return true
}

// nightWorkers are the task slots by class the re-check counts on: the
// live workers' (a class scaled from zero has some once KEDA has started
// them), else what --workers assumed at submit.
func nightWorkers(ctx context.Context, rdb redis.UniversalClient, est *state.PlanEstimate, now time.Time) (map[string]int, error) {
	classes := make([]string, len(est.Classes)) // one estimate per class
	for i, c := range est.Classes {
		classes[i] = c.Class
	}
	out := map[string]int{}
	if rdb != nil {
		live, err := fleet.RegisteredWorkers(ctx, rdb, classes, now)
		if err != nil {
			return nil, err
		}
		out = live
	}
	for _, c := range est.Classes {
		if out[c.Class] == 0 && c.WorkersFrom == state.WorkersAssumed {
			out[c.Class] = c.Workers
		}
	}
	return out, nil
}
