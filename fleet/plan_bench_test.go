package fleet_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// BenchmarkNightlyPlannedVsSubmission: a heterogeneous nightly on real
// redis-server and versitygw, with W = 2 and then 4 `worker run`
// processes of one slot each, as a fleet runs them (live before the
// night, the default --prefetch): 16 short graphs and 3 long ones whose
// models sort last (so submitted last). Durations are a real nightly's
// (seconds to half a minute) scaled down ×10 to fit the bench on 2 cores:
// a graph's measurement is bounded by its bench_time (0.1 s to 2.4 s) on
// a model whose every call takes tens of ms. Each worker count runs two
// nights over re-recorded bundles (new samples, so every graph is tuned
// again): the first in submission order with no history (its finish is a
// guess from the bundles), the second planned from the first's history
// (longest expected first). It prints the whole night's makespan, from
// the submission's start to the last finalize, ÷ the lower bound
// (max(total tuning ÷ workers, longest graph)), and the planned night's
// finish estimate error (expected vs actual span from the enqueue to the
// last finalize). Targets: planned ≤ 1.15; estimate within ±20 %. A row
// says undecided when the machine, not the plan, moved the figure: the
// long graphs ran over verdict.Far from their nominal size, or the
// planned night's graphs took over 1.25× (or under 0.8×) what they took
// the night before, which its estimate is made of.
func BenchmarkNightlyPlannedVsSubmission(b *testing.B) {
	s := newPlanStack(b)
	store := s.store
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
	// prefix keeps each worker count's models apart: on 2 cores, 4
	// workers slow each other's graphs down, so a 2-worker night's
	// history is not a 4-worker night's (on a GPU fleet each task has its
	// GPU to itself).
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
	ctx := context.Background()
	runs := runstate.NewRuns(s.rdb)
	day := 0
	type nightResult struct {
		ratio  float64 // whole night ÷ lower bound
		finish *report.Finish
		took   map[string]float64 // each model's graph's tuning seconds
		long   time.Duration      // the long graphs' median tuning time
	}
	// night submits the fleet to the live workers and follows the night
	// to its end.
	night := func(workers int, submissionOrder bool) nightResult {
		record()
		day++
		start := time.Now() // a producer's start: the whole night counts
		plan := s.submitRegistered(b, fleet.Options{Date: time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC), SubmissionOrder: submissionOrder})
		if c := plan.Estimate.Classes[0]; c.Workers != workers || c.WorkersFrom != state.WorkersRegistered {
			b.Fatalf("estimate of %d registered slots: %+v", workers, c)
		}
		if _, err := fleet.Wait(ctx, runs, plan, 20*time.Millisecond, fleet.NoReport{}); err != nil {
			b.Fatal(err)
		}
		res := nightResult{took: map[string]float64{}}
		var durations, longs []float64
		var last time.Time
		for _, e := range plan.Entries {
			var r tuner.Result
			if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(e.Run, "0"), &r); err != nil {
				b.Fatal(err)
			}
			if r.Reused {
				b.Fatalf("%s: reused, want tuned", e.Model)
			}
			d := r.Duration.Seconds()
			durations = append(durations, d)
			res.took[strings.TrimPrefix(e.Model, prefix)] = d
			if strings.Contains(e.Model, "long") {
				longs = append(longs, d)
			}
			st, err := runs.Get(ctx, e.Run)
			if err != nil {
				b.Fatal(err)
			}
			if st.FinishedAt.After(last) {
				last = st.FinishedAt
			}
		}
		sum, err := report.Summarize(ctx, store, plan)
		if err != nil {
			b.Fatal(err)
		}
		res.finish = sum.Finish
		res.ratio = last.Sub(start).Seconds() / nightplan.LowerBound(durations, workers)
		res.long = time.Duration(nightplan.Median(longs) * float64(time.Second))
		if !submissionOrder {
			for _, e := range plan.Entries {
				for _, g := range e.Estimates {
					if g.Source != state.EstimateHistory {
						b.Fatalf("planned night: %s graph %s estimated by %s", e.Model, g.Graph, g.Source)
					}
				}
			}
		}
		return res
	}
	// A long graph's nominal time: its warm-up (a quarter of its bench
	// time), its bench time and a build, on the quiet machine.
	nominalLong := 2400*time.Millisecond*5/4 + 300*time.Millisecond
	b.ResetTimer()
	for range b.N {
		for _, workers := range []int{2, 4} {
			prefix = fmt.Sprintf("w%d-", workers)
			stop := s.startWorkerProcesses(b, workers)
			first := night(workers, true)
			planned := night(workers, false)
			stop()
			var drift []float64
			for m, d := range planned.took {
				if was := first.took[m]; was > 0 {
					drift = append(drift, d/was)
				}
			}
			errPct := math.NaN()
			if f := planned.finish; f != nil && f.ErrorPercent != nil {
				errPct = *f.ErrorPercent
			}
			loaded := verdict.Nominal("long", planned.long, nominalLong)
			b.ReportMetric(first.ratio, fmt.Sprintf("submission-makespan/bound-%dw", workers))
			b.ReportMetric(planned.ratio, fmt.Sprintf("planned-makespan/bound-%dw", workers))
			b.ReportMetric(errPct, fmt.Sprintf("estimate-error-%%-%dw", workers))
			fmt.Printf("planned nightly of 16 short + 3 long graphs, %d worker processes: whole night ÷ lower bound: submission order %.3f, planned %.3f (target ≤ 1.15, met: %s)\n",
				workers, first.ratio, planned.ratio, verdict.Of(planned.ratio <= 1.15, loaded))
			fmt.Printf("planned nightly of 16 short + 3 long graphs, %d worker processes: the planned night's finish estimate error %+.1f%% (target ±20%%, met: %s); the first night, no history: %s\n",
				workers, errPct, verdict.Of(math.Abs(errPct) <= 20, loaded, verdict.Drift("the planned night's graphs (median)", nightplan.Median(drift), 1.25)), first.finish.Line())
		}
	}
}
