package report_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"
)

// On a real S3 server (versitygw) and a real redis-server: history keys
// list in time order, the nightly's documents are written, and replicas
// reporting at once send the webhook once.
func TestNightlyOnRealServices(t *testing.T) {
	ctx := context.Background()
	opt, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	store, err := artifacts.NewS3(testsvc.S3(t))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	// Three nights, appended out of order; the last one's graph fails.
	for _, i := range []int{2, 0, 1} {
		g := history.Graph{Name: "0", Status: history.GraphDone, Candidate: "ort:cpu:basic",
			Bench: &history.Bench{BatchSize: 1, Samples: 100, MeanMs: 1, P50Ms: 1, P90Ms: 1.1, P99Ms: 1.2, CV: 0.05, Throughput: 1000}}
		status := "done"
		if i == 2 {
			g = history.Graph{Name: "0", Status: history.GraphFailed}
			status = "failed"
		}
		e := &history.Entry{Model: "m", Platform: "cpu", Target: "cpu", Run: "m-night" + string(rune('1'+i)), Created: t0.Add(time.Duration(i) * 24 * time.Hour),
			Status: status, Device: "cpu", StateKey: artifacts.BlobKey(strings.Repeat("0", 64)), StateSHA256: strings.Repeat("0", 64), Graphs: []history.Graph{g}}
		if ok, err := history.Append(ctx, store, e); err != nil || !ok {
			t.Fatalf("append night %d: %v %v", i+1, ok, err)
		}
	}
	plan := putPlan(t, store, state.Plan{Nightly: "2026-12-03-bbbbbbbbbbbb", Entries: []state.PlanEntry{
		{Model: "m", Target: "cpu", Run: "m-night3", Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1},
	}})
	h := newHook(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := report.Nightly(ctx, store, plan, report.Links{})
			if err != nil {
				t.Error(err)
				return
			}
			if e := s.Entries[0]; e.PreviousRun != "m-night2" || e.Status != report.StatusFailed || s.Totals.NewlyFailing != 1 || s.Totals.Regressions != 1 {
				t.Errorf("summary %+v %+v", s.Totals, e)
			}
			if _, err := report.Notify(ctx, store, s, h.srv.URL, report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if h.n.Load() != 1 {
		t.Fatalf("webhook got %d posts, want 1", h.n.Load())
	}
	for _, k := range []string{report.SummaryKey(plan.Nightly), report.ReportKey(plan.Nightly), report.NotifiedKey(plan.Nightly)} {
		if _, err := store.Stat(ctx, k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}
