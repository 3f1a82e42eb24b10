package fleet

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
	"github.com/tunefleet/tunefleet/nightplan"
)

// Sizes of BenchmarkPlanningOverHistory.
const (
	planModels   = 20
	planShallow  = 10
	planDeep     = 10 * planShallow
	planGraphs   = 4
	planClass    = "cpu"
	planPlatform = "cpu-plat"
	// planPasses is how many times a round plans the models: a round of
	// a few milliseconds would measure the machine's moments.
	planPasses = 5
)

// BenchmarkPlanningOverHistory measures what a nightly's planning reads
// of each model's history for its estimate (pasts, then nightplan.Pick:
// the newest entries with the night's candidates), for 20 models on a
// file store whose history holds 10 nights of each, and on one that holds
// 100, in nine rounds alternating between the two. It prints the cost per
// model at each depth and their ratio, 100 nights ÷ 10, from nine rounds of each (target ≤ 1.5:
// flat; every night adds an entry to every model's history, so planning
// that lists the history costs more each night, for every model).
func BenchmarkPlanningOverHistory(b *testing.B) {
	ctx := context.Background()
	shallow, deep := pastsFixture(b, planShallow), pastsFixture(b, planDeep)
	cands := []string{"ort:cpu:basic"}
	plan := func(store artifacts.Store) time.Duration {
		began := time.Now()
		for m := range planModels * planPasses {
			m %= planModels
			ps, err := pasts(ctx, store, fmt.Sprintf("team.m%03d", m), planClass)
			if err != nil {
				b.Fatal(err)
			}
			if known := nightplan.Pick(ps, cands); len(known) != planGraphs {
				b.Fatalf("estimates %v from %d entries", known, len(ps))
			}
		}
		return time.Since(began)
	}
	var rs, rd []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 9 {
			rs = append(rs, plan(shallow))
			rd = append(rd, plan(deep))
		}
	}
	b.StopTimer()
	ratio, met := verdict.Scaling(fmt.Sprint(planShallow, " nights"), fmt.Sprint(planDeep, " nights"), planModels*planPasses, planModels*planPasses, rs, rd, 1.5)
	per := func(ds []time.Duration) time.Duration {
		m := ds[0]
		for _, d := range ds {
			m = min(m, d)
		}
		return m / (planModels * planPasses)
	}
	b.ReportMetric(ratio, "deep/shallow-per-model")
	fmt.Printf("nightly planning's history reads (pasts) of %d models: per model %v over %d nights of history, %v over %d: %d ÷ %d nights = %.2f (target ≤ 1.5: flat), met: %s\n",
		planModels, per(rs).Round(time.Microsecond), planShallow, per(rd).Round(time.Microsecond), planDeep, planDeep, planShallow, ratio, met)
}

// pastsFixture is a file store holding nights nights of history of
// planModels models of planGraphs graphs, each entry under its class and
// its platform and named in their heads, as finalize writes them.
func pastsFixture(b *testing.B, nights int) artifacts.Store {
	b.Helper()
	store, err := artifacts.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for m := range planModels {
		model := fmt.Sprintf("team.m%03d", m)
		for d := range nights {
			created := t0.Add(time.Duration(d) * 24 * time.Hour)
			var gs []history.Graph
			for g := range planGraphs {
				gs = append(gs, history.Graph{Name: fmt.Sprint(g), Status: history.GraphDone, Candidate: "ort:cpu:basic", SpentSeconds: float64(10 + g)})
			}
			e := &history.Entry{Format: history.Format, Model: model, Platform: planPlatform, Target: planClass, Run: fmt.Sprintf("%s-n%04d", model, d),
				Created: created, FinalizedAt: created.Add(time.Hour), Status: history.GraphDone, Device: "cpu",
				StateKey: artifacts.BlobKey(strings.Repeat("0", 64)), StateSHA256: strings.Repeat("0", 64),
				Settings: &history.Settings{Candidates: []string{"ort:cpu:basic"}}, Graphs: gs}
			historytest.Record(b, store, e)
		}
	}
	return store
}
