package web

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tunefleet/tunefleet/runstate"
)

// The series /metrics serves (deploy/'s Grafana dashboard queries them by
// these names).
const (
	QueueTasksMetric = "tunefleet_queue_tasks"
	RunsMetric       = "tunefleet_runs"
)

// collector reads Redis at scrape time: the asynq Inspector's queue
// counts and the run indexes' sizes. Nothing is cached, so a scrape sees
// what `producer runs` and asynqmon would.
type collector struct {
	insp       *asynq.Inspector
	runs       *runstate.Runs
	queueTasks *prometheus.Desc
	runCount   *prometheus.Desc
}

func newCollector(insp *asynq.Inspector, runs *runstate.Runs) *collector {
	return &collector{insp: insp, runs: runs,
		queueTasks: prometheus.NewDesc(QueueTasksMetric, "Tasks in each asynq queue, by state (pending, active, scheduled, retry, archived, completed, aggregating).", []string{"queue", "state"}, nil),
		runCount:   prometheus.NewDesc(RunsMetric, "Runs Redis indexes, by status (running; final ones within the workers' --retention).", []string{"status"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queueTasks
	ch <- c.runCount
}

// scrapeTimeout bounds one scrape's Redis calls: a Redis that hangs shows
// as a failed scrape, not a stuck one.
const scrapeTimeout = 10 * time.Second

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	queues, err := c.insp.Queues()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.queueTasks, fmt.Errorf("list asynq queues: %w", err))
	}
	for _, q := range queues {
		info, err := c.insp.GetQueueInfo(q)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.queueTasks, fmt.Errorf("queue %s: %w", q, err))
			continue
		}
		for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled, "retry": info.Retry,
			"archived": info.Archived, "completed": info.Completed, "aggregating": info.Aggregating} {
			ch <- prometheus.MustNewConstMetric(c.queueTasks, prometheus.GaugeValue, float64(n), q, state)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.runs.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.runCount, err)
		return
	}
	for status, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.runCount, prometheus.GaugeValue, float64(n), status)
	}
}
