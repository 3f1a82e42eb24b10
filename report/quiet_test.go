package report_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"
)

// An entry with nothing to say beyond its status (done, every graph done
// and measured stable, no change, no regression) gets one line in the
// nightly page and report.html instead of its graphs' chart and table;
// every other entry keeps them.
func TestQuietEntriesAreOneLine(t *testing.T) {
	stable := &history.Bench{BatchSize: 1, Samples: 100, MeanMs: 1, P50Ms: 1, P90Ms: 1.1, P99Ms: 1.2, CV: 0.01, Throughput: 1000, Stable: true}
	unstable := *stable
	unstable.Stable = false
	rows := func(n int, now, before *history.Bench) []report.GraphRow {
		var gs []report.GraphRow
		for i := range n {
			gs = append(gs, report.GraphRow{Name: fmt.Sprint(i), Status: report.StatusDone, Candidate: "ort:cpu:basic", Bench: now,
				PreviousStatus: report.StatusDone, PreviousCandidate: "ort:cpu:basic", PreviousBench: before})
		}
		return gs
	}
	slower := []history.Change{{Kind: history.ChangeSlower, Graph: "1", Regression: true, Detail: "−40 %"}}
	for _, tc := range []struct {
		name      string
		e         report.Entry
		quiet     string // the line a quiet entry shows; "" when its table shows
		linkToRun bool
	}{
		{"done, compared, nothing changed", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusDone, Graphs: rows(3, stable, stable)},
			"3 graphs done, measured stable, none changed beyond noise since r1", true},
		{"the first entry of its history", report.Entry{Run: "r2", Status: report.StatusDone, Graphs: rows(1, stable, nil)},
			"1 graph done, measured stable: the first entry of its history", true},
		{"carried", report.Entry{Run: "r2", Status: report.StatusDone, Carried: true, Graphs: rows(2, stable, nil)},
			"2 graphs, carried forward: nothing ran tonight, nothing to compare", true},
		{"a regression", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusDone, Regressions: 1, Changes: slower, Graphs: rows(3, stable, stable)}, "", false},
		{"an unstable measurement tonight", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusDone, Graphs: rows(2, &unstable, stable)}, "", false},
		{"an unstable measurement before", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusDone, Graphs: rows(2, stable, &unstable)}, "", false},
		{"settings changed", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusDone, SettingsChanged: "candidates", Graphs: rows(2, stable, stable)}, "", false},
		{"a failed run", report.Entry{Run: "r2", PreviousRun: "r1", Status: report.StatusFailed, Reasons: []string{"graph 1 failed"}, Graphs: rows(2, stable, stable)}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			e.Model, e.Target, e.Outcome = "team.m", "cpu", "submitted"
			for _, l := range []report.Links{{}, {Served: true}} {
				body, err := report.Body(&report.Summary{Nightly: "2026-12-04-aaaaaaaaaaaa", Entries: []report.Entry{e}}, l)
				if err != nil {
					t.Fatal(err)
				}
				page := string(body)
				tables := strings.Count(page, "<th>graph</th>")
				if tc.quiet == "" {
					if tables != 1 || strings.Contains(page, `class="meta quiet"`) {
						t.Errorf("links %+v: %d graph tables, quiet line %v; want the table", l, tables, strings.Contains(page, "quiet"))
					}
					continue
				}
				if tables != 0 || !strings.Contains(page, tc.quiet) || !strings.Contains(page, fmt.Sprintf(`data-graphs="%d"`, len(e.Graphs))) {
					t.Errorf("links %+v: %d graph tables; want none and the line %q:\n%s", l, tables, tc.quiet, page)
				}
				if has := strings.Contains(page, `<a href="/runs/r2">its run lists them</a>`); has != (l.Served && tc.linkToRun) {
					t.Errorf("links %+v: a link to the run's graphs %v, want %v", l, has, l.Served && tc.linkToRun)
				}
			}
		})
	}
}
