package report_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/history/historytest"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"
)

// Sizes of BenchmarkNightlyShowOverHistory: a night of showModels models
// shown over a history of shallowNights and of 10× as many nights.
const (
	showModels    = 20
	shallowNights = 10
	deepNights    = 10 * shallowNights
)

// BenchmarkNightlyShowOverHistory measures what the web UI's nightly page
// and `producer nightly show` read, report.Show, for the newest night of
// 20 models on a file store whose history holds 10 nights of each model,
// and on one that holds 100 (issue 35: queries independent of the
// history's length), in nine rounds alternating between the two. It
// prints the per-entry cost at each depth and their ratio, 100 nights ÷
// 10 (target ≤ 1.5: flat; each night adds an entry to every model's
// history, so a page that lists the history bends).
func BenchmarkNightlyShowOverHistory(b *testing.B) {
	ctx := context.Background()
	shallow, deep := showFixture(b, shallowNights), showFixture(b, deepNights)
	var rs, rd []time.Duration
	show := func(store artifacts.Store) time.Duration {
		began := time.Now()
		s, err := report.Show(ctx, store, showNightly)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(began)
		if s.Totals.Done != showModels || s.Totals.Regressions != 0 || s.Entries[0].PreviousRun == "" {
			b.Fatalf("summary %+v, first entry %+v", s.Totals, s.Entries[0])
		}
		return took
	}
	b.ResetTimer()
	for range b.N {
		for range 9 {
			rs = append(rs, show(shallow))
			rd = append(rd, show(deep))
		}
	}
	b.StopTimer()
	ratio, met := verdict.Scaling(fmt.Sprint(shallowNights, " nights"), fmt.Sprint(deepNights, " nights"), showModels, showModels, rs, rd, 1.5)
	per := func(ds []time.Duration) time.Duration { return minOf(ds) / showModels }
	b.ReportMetric(ratio, "deep/shallow-per-entry")
	fmt.Printf("nightly page (report.Show) of %d models: per entry %v over %d nights of history, %v over %d: %d ÷ %d nights = %.2f (target ≤ 1.5: flat), met: %s\n",
		showModels, per(rs).Round(time.Microsecond), shallowNights, per(rd).Round(time.Microsecond), deepNights, deepNights, shallowNights, ratio, met)
}

// showNightly is the fixture's newest night.
const showNightly = "2026-12-31-bbbbbbbbbbbb"

// showFixture is a file store holding nights nights of history of
// showModels models, each entry under its class and its platform and
// named in their heads as finalize does, and the plan of the newest night.
func showFixture(b *testing.B, nights int) artifacts.Store {
	b.Helper()
	ctx := context.Background()
	store, err := artifacts.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	plan := state.Plan{Format: state.PlanFormat, Nightly: showNightly, FleetDigest: "sha256:" + strings.Repeat("ab", 32), CreatedAt: t0.Add(time.Duration(nights) * 24 * time.Hour)}
	for m := range showModels {
		model := fmt.Sprintf("team.m%03d", m)
		for d := range nights {
			created := t0.Add(time.Duration(d) * 24 * time.Hour)
			g := history.Graph{Name: "0", Status: history.GraphDone, Candidate: "ort:cpu:basic",
				Bench: &history.Bench{BatchSize: 1, Samples: 100, MeanMs: 1, P50Ms: 1, P90Ms: 1.1, P99Ms: 1.2, CV: 0.05, Throughput: 1000}}
			e := &history.Entry{Model: model, Platform: "cpu-plat", Target: "cpu", Run: fmt.Sprintf("%s-n%04d", model, d), Created: created,
				FinalizedAt: created.Add(time.Hour), Status: history.GraphDone, Device: "cpu", StateKey: artifacts.BlobKey(strings.Repeat("0", 64)),
				StateSHA256: strings.Repeat("0", 64), Graphs: []history.Graph{g}}
			historytest.Record(b, store, e)
			if d == nights-1 {
				plan.Entries = append(plan.Entries, state.PlanEntry{Model: model, Target: "cpu", Run: e.Run, Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1})
			}
		}
	}
	if err := artifacts.PutJSON(ctx, store, state.PlanKey(plan.Nightly), plan); err != nil {
		b.Fatal(err)
	}
	return store
}

func minOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}
