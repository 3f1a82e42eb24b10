package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// reliabilityFlags are worker run's flags for how long it keeps at a
// failing graph and how it keeps runs moving.
type reliabilityFlags struct {
	retryBudget    time.Duration
	maxDeaths      int
	reconcileEvery time.Duration
	retention      time.Duration
	pollInterval   time.Duration
	idlePoll       time.Duration
}

func (f *reliabilityFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&f.retryBudget, "retry-budget", jobs.DefaultRetryBudget,
		"how long a graph's (or finalize's) retryable failures (S3 or disk trouble, a lost machine) may go on before it gives up")
	fl.IntVar(&f.maxDeaths, "max-deaths", jobs.DefaultMaxDeaths,
		"attempts at a graph that may die with their worker (killed, out of memory) before the graph is quarantined as failed")
	fl.DurationVar(&f.retention, "retention", runstate.DefaultRetention,
		"how long a finished run's bookkeeping stays in Redis (the store keeps the run; status rebuilds it from there); negative: forever")
	fl.DurationVar(&f.reconcileEvery, "reconcile-every", 30*time.Second,
		"how often the fleet's reconciler (one worker at a time) repairs runs that cannot finish by themselves (0: never from this worker)")
	fl.DurationVar(&f.pollInterval, "poll-interval", jobs.DefaultPollInterval,
		"how often a worker with a free slot asks Redis for work: a run's first task waits about half of it; each poll is a few Redis commands")
	fl.DurationVar(&f.idlePoll, "idle-poll", jobs.DefaultIdlePoll,
		"the longest an idle worker waits between asks of a queue that keeps answering empty (each empty answer doubles the wait from --poll-interval; an enqueue wakes it at once); --poll-interval or less: ask at every poll")
}

// check validates the flags: before the worker connects to anything, so
// that a bad value is the user's to fix (exit 2), whatever else is down.
func (f *reliabilityFlags) check() error {
	if f.retryBudget <= 0 {
		return usageErr(fmt.Errorf("--retry-budget must be positive, e.g. 30m"))
	}
	if f.maxDeaths < 1 {
		return usageErr(fmt.Errorf("--max-deaths must be at least 1"))
	}
	if f.reconcileEvery < 0 {
		return usageErr(fmt.Errorf("--reconcile-every must be 0 (off) or positive"))
	}
	if f.pollInterval < time.Millisecond {
		return usageErr(fmt.Errorf("--poll-interval %s: want at least 1ms, e.g. 25ms", f.pollInterval))
	}
	if f.idlePoll < 0 {
		return usageErr(fmt.Errorf("--idle-poll %s: want 0 or more, e.g. 1s (at most --poll-interval: ask at every poll)", f.idlePoll))
	}
	if f.retention == 0 {
		return usageErr(fmt.Errorf("--retention must be positive, e.g. 720h (or negative: forever)"))
	}
	return nil
}

func (f *reliabilityFlags) apply(cfg *jobs.WorkerConfig) error {
	if err := f.check(); err != nil {
		return err
	}
	cfg.RetryBudget, cfg.MaxDeaths, cfg.Retention = f.retryBudget, f.maxDeaths, f.retention
	cfg.ReconcileEvery, cfg.PollInterval, cfg.IdlePoll = f.reconcileEvery, f.pollInterval, f.idlePoll
	if f.reconcileEvery == 0 {
		cfg.ReconcileEvery = -1
	}
	return nil
}
