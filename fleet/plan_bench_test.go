package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// BenchmarkNightlyPlannedVsSubmission: a heterogeneous nightly on real
// redis-server and versitygw, 2 and then 4 worker slots: 16 short graphs
// and 3 long ones whose models sort last (so submitted last). Durations are
// a real nightly's (seconds to half a minute) scaled down ×10 to fit the
// bench on 2 cores: a graph's measurement is bounded by its bench_time
// (0.1 s to 2.4 s) on a model whose every call takes tens of ms. Each
// worker count runs two nights over re-recorded bundles (new samples, so
// every graph is tuned again): the first in submission order, the second
// planned from the first's history (longest expected first). It prints
// makespan ÷ lower bound (max(total work ÷ workers, longest graph), from
// the graphs' own start and duration) side by side, and the planned
// night's estimate error (expected vs actual span from the enqueue to the
// last finalize). Targets: planned ≤ 1.15; estimate within ±20 %.
func BenchmarkNightlyPlannedVsSubmission(b *testing.B) {
	s := newPlanStack(b)
	rdb, store := s.rdb, s.store
	type model struct {
		name  string
		bench time.Duration
	}
	var models []model
	for i := range 16 {
		models = append(models, model{fmt.Sprintf("a%02d", i), time.Duration(100+20*i) * time.Millisecond})
	}
	for i := range 3 {
		models = append(models, model{fmt.Sprintf("z-long%d", i), 2400 * time.Millisecond})
	}
	seed := uint64(0)
	// prefix keeps each worker count's models apart: on 2 cores, 4 slots
	// slow each other's graphs down, so a 2-slot night's history is not a
	// 4-slot night's (on a GPU fleet each task has its GPU to itself).
	prefix := ""
	record := func() {
		seed++
		var fms []fleetModel
		for i, m := range models {
			// Samples of its own: no two graphs share a work key.
			fms = append(fms, fleetModel{prefix + m.name, m.bench.String(), []graphPart{{onnxtest.Slow(384), nil, seed*100 + uint64(i)}}})
		}
		s.writeFleet(b, fms)
	}
	reg := s.reg
	ctx := context.Background()
	runs := runstate.NewRuns(rdb)
	day := 0
	// night starts a worker with workers slots, submits the fleet and
	// follows the night to its end.
	night := func(workers int, submissionOrder bool) (ratio, errPct float64, plan *state.Plan) {
		record()
		day++
		// The worker is live before the night is submitted, as a fleet's
		// are: its slots are the registered ones, and its start-up is not
		// in the night's span. The tasks are held until every entry is
		// submitted, then enqueued in the night's order at once.
		w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: reg, Queues: []string{"cpu"},
			Concurrency: workers, WorkDir: b.TempDir()}) // the default prefetch: a task's download overlaps the one before it
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		plan = s.submitRegistered(b, fleet.Options{Date: time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC), SubmissionOrder: submissionOrder})
		if c := plan.Estimate.Classes[0]; c.Workers != workers || c.WorkersFrom != state.WorkersRegistered {
			b.Fatalf("estimate of %d registered slots: %+v", workers, c)
		}
		_, err = fleet.Wait(ctx, runs, plan, 20*time.Millisecond, fleet.NoReport{})
		w.Shutdown()
		if err != nil {
			b.Fatal(err)
		}
		var durations []float64
		var first, last time.Time
		for _, e := range plan.Entries {
			var r tuner.Result
			if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(e.Run, "0"), &r); err != nil {
				b.Fatal(err)
			}
			if r.Reused {
				b.Fatalf("%s: reused, want tuned", e.Model)
			}
			durations = append(durations, r.Duration.Seconds())
			if first.IsZero() || r.StartedAt.Before(first) {
				first = r.StartedAt
			}
			if end := r.StartedAt.Add(r.Duration); end.After(last) {
				last = end
			}
		}
		s, err := report.Summarize(ctx, store, plan)
		if err != nil {
			b.Fatal(err)
		}
		if s.Finish != nil && s.Finish.ErrorPercent != nil {
			errPct = *s.Finish.ErrorPercent
		}
		return last.Sub(first).Seconds() / nightplan.LowerBound(durations, workers), errPct, plan
	}
	b.ResetTimer()
	for range b.N {
		for _, workers := range []int{2, 4} {
			prefix = fmt.Sprintf("w%d-", workers)
			sub, _, _ := night(workers, true)
			planned, errPct, plan := night(workers, false)
			for _, e := range plan.Entries {
				for _, g := range e.Estimates {
					if g.Source != state.EstimateHistory {
						b.Fatalf("planned night: %s graph %s estimated by %s", e.Model, g.Graph, g.Source)
					}
				}
			}
			b.ReportMetric(sub, fmt.Sprintf("submission-makespan/bound-%dw", workers))
			b.ReportMetric(planned, fmt.Sprintf("planned-makespan/bound-%dw", workers))
			b.ReportMetric(errPct, fmt.Sprintf("estimate-error-%%-%dw", workers))
			fmt.Printf("nightly of 16 short + 3 long graphs (long submitted last), %d workers: makespan ÷ lower bound: submission order %.3f, planned %.3f (target ≤ 1.15); planned night's finish estimate error %+.1f%% (target ±20%%)\n",
				workers, sub, planned, errPct)
		}
	}
}
