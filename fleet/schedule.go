package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// Schedule is a checked cron spec (5 fields, UTC, or a descriptor such as
// @daily), as asynq's Scheduler reads it.
type Schedule string

// ParseSchedule checks a cron spec with the parser asynq's Scheduler uses,
// so that a bad one is refused before anything starts.
func ParseSchedule(spec string) (Schedule, error) {
	if _, err := cron.ParseStandard(spec); err != nil {
		return "", fmt.Errorf("--schedule %q: %v (want 5 cron fields, e.g. \"0 2 * * *\" for 02:00 UTC daily)", spec, err)
	}
	return Schedule(spec), nil
}

// Scheduled nightlies go through asynq: its Scheduler enqueues one
// fleet:nightly task per tick on their own queue (no tuning worker serves
// it), and the producer serving that queue runs the nightly. With two
// replicas both schedulers tick, and the fixed task id makes the second
// enqueue of a tick a conflict while the first is queued or running; a
// later duplicate finds the night's plan and submits nothing.
const (
	TypeNightly  = "fleet:nightly"
	NightlyQueue = "tunefleet.nightly"
)

// RunSchedule runs night at every tick of spec until ctx ends. night gets
// the tick's time (the nightly's date is its UTC date).
func RunSchedule(ctx context.Context, rdb redis.UniversalClient, spec Schedule, night func(ctx context.Context, at time.Time)) error {
	sched := asynq.NewSchedulerFromRedisClient(rdb, &asynq.SchedulerOpts{Location: time.UTC, LogLevel: asynq.ErrorLevel})
	if _, err := sched.Register(string(spec), asynq.NewTask(TypeNightly, nil),
		asynq.Queue(NightlyQueue), asynq.TaskID(TypeNightly), asynq.MaxRetry(0)); err != nil {
		return fmt.Errorf("schedule %q: %w", spec, err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 1, Queues: map[string]int{NightlyQueue: 1}, LogLevel: asynq.ErrorLevel,
		TaskCheckInterval: 200 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeNightly, func(ctx context.Context, t *asynq.Task) error {
		night(ctx, time.Now())
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("serve scheduled nightlies: %w", err)
	}
	defer srv.Shutdown()
	if err := sched.Start(); err != nil {
		return fmt.Errorf("start the schedule: %w", err)
	}
	defer sched.Shutdown()
	<-ctx.Done()
	return nil
}
