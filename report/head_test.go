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
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"
)

// A night is summarized the same through the history's head as through
// its listing: the newest night, a night older than the head's entries,
// a run not finalized yet and a cancelled one.
func TestSummaryThroughTheHistoryHead(t *testing.T) {
	ctx := context.Background()
	nights := history.HeadDepth + 5
	for _, tc := range []struct {
		name        string
		night       int    // which night's run the plan names
		run         string // "": the night's run
		cancelled   bool
		wantStatus  string
		wantPrevRun string
	}{
		{"the newest night", nights - 1, "", false, report.StatusDone, fmt.Sprintf("m-n%04d", nights-2)},
		{"a night older than the head", 2, "", false, report.StatusDone, "m-n0001"},
		{"the first night", 0, "", false, report.StatusDone, ""},
		{"a run not finalized yet", 0, "m-pending", false, report.StatusPending, ""},
		{"a cancelled run", 0, "m-cancelled", true, report.StatusCancelled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := artifacts.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
			for d := range nights {
				created := t0.Add(time.Duration(d) * 24 * time.Hour)
				e := &history.Entry{Model: "m", Platform: "cpu-plat", Target: "cpu", Run: fmt.Sprintf("m-n%04d", d), Created: created,
					FinalizedAt: created.Add(time.Hour), Status: history.GraphDone, Device: "cpu", StateKey: artifacts.BlobKey(strings.Repeat("0", 64)),
					StateSHA256: strings.Repeat("0", 64), Graphs: []history.Graph{{Name: "0", Status: history.GraphDone, Candidate: "ort:cpu:basic"}}}
				historytest.Record(t, store, e)
			}
			run := tc.run
			if run == "" {
				run = fmt.Sprintf("m-n%04d", tc.night)
			}
			if tc.cancelled {
				if err := artifacts.PutJSON(ctx, store, artifacts.StateKey(run), map[string]any{"status": report.StatusCancelled, "reasons": []string{"cancelled"}}); err != nil {
					t.Fatal(err)
				}
			}
			plan := putPlan(t, store, state.Plan{Nightly: "2026-12-03-cccccccccccc", Entries: []state.PlanEntry{
				{Model: "m", Target: "cpu", Run: run, Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1},
			}})
			s, err := report.Show(ctx, store, plan.Nightly)
			if err != nil {
				t.Fatal(err)
			}
			if e := s.Entries[0]; e.Status != tc.wantStatus || e.PreviousRun != tc.wantPrevRun || tc.wantStatus == report.StatusDone && e.Platform != "cpu-plat" {
				t.Fatalf("entry %+v, want status %s, previous run %q", e, tc.wantStatus, tc.wantPrevRun)
			}
		})
	}
}
