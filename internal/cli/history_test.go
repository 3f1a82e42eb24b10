package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"
)

// storeWithHistory writes two history entries of model m on cpu (the
// second ten times slower) and a plan naming the second run.
func storeWithHistory(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	store, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for i, run := range []string{"m-1", "m-2"} {
		k := float64(1 + 9*i)
		e := &history.Entry{Model: "m", Platform: "cpu", Target: "cpu", Run: run, Created: t0.Add(time.Duration(i) * 24 * time.Hour),
			Status: "done", Device: "cpu", StateKey: "blobs/sha256/" + strings.Repeat("0", 64), StateSHA256: strings.Repeat("0", 64),
			Graphs: []history.Graph{{Name: "0", Status: "done", Candidate: "ort:cpu:basic",
				Bench: &history.Bench{BatchSize: 1, Samples: 100, MeanMs: k, P50Ms: k, P90Ms: 1.1 * k, P99Ms: 1.2 * k, CV: 0.05, Throughput: 1000 / k}}}}
		if _, err := history.Append(ctx, store, e); err != nil {
			t.Fatal(err)
		}
	}
	plan := state.Plan{Format: state.PlanFormat, Nightly: "2026-12-02-abcdefabcdef", CreatedAt: t0,
		Entries: []state.PlanEntry{{Model: "m", Target: "cpu", Run: "m-2", Outcome: state.OutcomeSubmitted}}}
	if err := artifacts.PutJSON(ctx, store, state.PlanKey(plan.Nightly), plan); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestHistoryAndNightlyReportCommands(t *testing.T) {
	t.Parallel()
	dir := storeWithHistory(t)
	st := "--store=file://" + dir
	o := producer(t, "history", "m", "--platform", "cpu", st)
	if o.code != 0 || !strings.Contains(o.stdout, "m-2") || !strings.Contains(o.stdout, "! m-2 graph 0 slower") {
		t.Fatalf("%v", o)
	}
	o = producer(t, "history", "m", "--platform", "cpu", "-o", "json", st)
	var rows []struct {
		Entry   history.Entry    `json:"entry"`
		Changes []history.Change `json:"changes"`
	}
	if o.code != 0 || json.Unmarshal([]byte(o.stdout), &rows) != nil || len(rows) != 2 || len(rows[1].Changes) != 1 || !rows[1].Changes[0].Regression {
		t.Fatalf("%v", o)
	}
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer srv.Close()
	for i := range 2 {
		o = producer(t, "nightly", "report", "2026-12-02-abcdefabcdef", "--notify", srv.URL, st)
		want := []string{"webhook: sent", "webhook: already_sent"}[i]
		if o.code != 0 || !strings.Contains(o.stdout, "1 regression(s)") || !strings.Contains(o.stdout, want) {
			t.Fatalf("report %d: %v", i, o)
		}
	}
	if posts.Load() != 1 {
		t.Fatalf("webhook got %d posts, want 1", posts.Load())
	}
}

func TestHistoryAndReportRefuseBadInput(t *testing.T) {
	t.Parallel()
	dir := storeWithHistory(t)
	st := "--store=file://" + dir
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "m"}, "--platform is required"},
		{[]string{"history", "m", "--platform", "../x"}, "must be one name"},
		{[]string{"history", "nosuch", "--platform", "cpu"}, "no history on cpu"},
		// A typo'd model: the store's model list says what it has (on
		// main: "check the model name", whatever the name).
		{[]string{"history", "mm", "--platform", "cpu"}, `the store has no model "mm"; did you mean m?`},
		{[]string{"history", "m", "--platform", "gpu"}, `model "m" is in the store on cpu, not on "gpu"`},
		{[]string{"fetch", "mm", "--platform", "cpu", "--out", out}, `the store has no model "mm"; did you mean m?`},
		// Only the flag that is missing is named (on main: "--platform
		// and --out DIR are required" with --platform given).
		{[]string{"fetch", "m", "--platform", "cpu", "-o", "json"}, "producer: --out DIR is required\n"},
		{[]string{"fetch", "m", "--out", out}, "producer: --platform P is required\n"},
		{[]string{"fetch", "m"}, "producer: --out DIR and --platform P are required\n"},
		{[]string{"history", "m", "--platform", "cpu", "-o", "yaml"}, "want text or json"},
		{[]string{"nightly", "report", "../etc"}, "bad nightly id"},
		{[]string{"nightly", "report", "2026-12-09-000000000000"}, "has no nightly/2026-12-09-000000000000/plan.json"},
		{[]string{"nightly", "report", "2026-12-02-abcdefabcdef", "--notify", "hooks.example/x"}, "want an http:// or https:// URL"},
		{[]string{"nightly", "frobnicate"}, "unknown command"},
	} {
		o := producer(t, append(tc.args, st)...)
		if o.code != 2 || !strings.Contains(o.stderr, tc.want) || strings.Count(strings.TrimSpace(o.stderr), "\n") != 0 {
			t.Errorf("%v\nwant exit 2 and one line with %q", o, tc.want)
		}
	}
	// Nothing was written by the refused reports.
	store, _ := artifacts.NewLocal(dir)
	if _, err := store.Stat(context.Background(), report.SummaryKey("2026-12-02-abcdefabcdef")); err == nil {
		t.Error("a refused report wrote summary.json")
	}
}
