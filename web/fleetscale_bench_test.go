package web

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
)

// Sizes of BenchmarkFleetPageOverHistory.
const (
	fleetModels  = 20
	fleetShallow = 10
	fleetDeep    = 10 * fleetShallow
)

// BenchmarkFleetPageOverHistory measures what the web UI's fleet page
// reads (every model's newest entry on every platform, compared with the
// one before it) for 20 models on a file store whose history holds 10
// nights of each, and on one that holds 100, in nine rounds alternating
// between the two. It prints the cost per model at each depth and their
// ratio, 100 nights ÷ 10 (target ≤ 1.5: flat; the page must not read every
// night of every model to show the newest).
func BenchmarkFleetPageOverHistory(b *testing.B) {
	ctx := context.Background()
	shallow, deep := fleetFixture(b, fleetShallow), fleetFixture(b, fleetDeep)
	page := func(store artifacts.Store) time.Duration {
		began := time.Now()
		keys, err := fleetKeys(ctx, store)
		if err != nil {
			b.Fatal(err)
		}
		p, err := fleet(ctx, store, keys)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(began)
		if len(p.Rows) != fleetModels || len(p.Platforms) != 1 || p.Rows[0].Cells[0] == nil || p.Rows[0].Cells[0].LastGood.IsZero() {
			b.Fatalf("page of %d rows, platforms %v", len(p.Rows), p.Platforms)
		}
		return took
	}
	var rs, rd []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 9 {
			rs = append(rs, page(shallow))
			rd = append(rd, page(deep))
		}
	}
	b.StopTimer()
	ratio, met := verdict.Scaling(fmt.Sprint(fleetShallow, " nights"), fmt.Sprint(fleetDeep, " nights"), fleetModels, fleetModels, rs, rd, 1.5)
	per := func(ds []time.Duration) time.Duration {
		m := ds[0]
		for _, d := range ds {
			m = min(m, d)
		}
		return m / fleetModels
	}
	b.ReportMetric(ratio, "deep/shallow-per-model")
	fmt.Printf("fleet page of %d models: per model %v over %d nights of history, %v over %d: %d ÷ %d nights = %.2f (target ≤ 1.5: flat), met: %s\n",
		fleetModels, per(rs).Round(time.Microsecond), fleetShallow, per(rd).Round(time.Microsecond), fleetDeep, fleetDeep, fleetShallow, ratio, met)
}

// fleetFixture is a file store holding nights nights of history of
// fleetModels models, each entry under its class and its platform and
// named in their heads, as finalize writes them, and each model's
// latest.json.
func fleetFixture(b *testing.B, nights int) artifacts.Store {
	b.Helper()
	ctx := context.Background()
	store, err := artifacts.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for m := range fleetModels {
		model := fmt.Sprintf("team.m%03d", m)
		for d := range nights {
			created := t0.Add(time.Duration(d) * 24 * time.Hour)
			g := history.Graph{Name: "0", Status: history.GraphDone, Candidate: "ort:cpu:basic",
				Bench: &history.Bench{BatchSize: 1, Samples: 100, MeanMs: 1, P50Ms: 1, P90Ms: 1.1, P99Ms: 1.2, CV: 0.05, Throughput: 1000}}
			e := &history.Entry{Format: history.Format, Model: model, Platform: "cpu-plat", Target: "cpu", Run: fmt.Sprintf("%s-n%04d", model, d), Created: created,
				FinalizedAt: created.Add(time.Hour), Status: history.GraphDone, Device: "cpu", StateKey: artifacts.BlobKey(strings.Repeat("0", 64)),
				StateSHA256: strings.Repeat("0", 64), Graphs: []history.Graph{g}}
			historytest.Record(b, store, e)
		}
		for _, where := range []string{"cpu-plat", "cpu"} {
			if err := artifacts.PutJSON(ctx, store, artifacts.LatestKey(model, where), map[string]string{"run": model}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return store
}
