package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"
)

// TestFinishLine: a planned night's finish is judged as an error
// percentage; a first night's guess is shown as a guess beside both
// spans, never as a percentage (issue 30: a 5-minute default showed
// "+2502 %"), in summary.json (no error_percent) and in its line (the
// text report, report.html and the web UI's nightly page print it).
func TestFinishLine(t *testing.T) {
	at := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	expected, actual := at.Add(300*time.Second), at.Add(12*time.Second)
	for _, tc := range []struct {
		name    string
		guess   bool
		actual  *time.Time
		want    []string
		wantPct bool
	}{
		{"planned from history", false, &actual, []string{"finish: expected 02:05:00 UTC, actual 02:00:12 UTC (estimate +2400% of the 12s actual span)"}, true},
		{"a guess", true, &actual, []string{"finish: guessed 02:05:00 UTC (a guess: no history yet", "actual 02:00:12 UTC (guessed span 5m00s, actual span 12.0s)"}, false},
		{"a guess, a run pending", true, nil, []string{"finish: guessed 02:05:00 UTC (a guess", "actual not yet"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := report.NewFinish(&state.PlanEstimate{EnqueuedAt: at, ExpectedFinish: &expected, Guess: tc.guess}, tc.actual)
			line := f.Line()
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
			if (f.ErrorPercent != nil) != tc.wantPct || (!tc.wantPct && strings.Contains(line, "%")) {
				t.Errorf("line %q, error percent %v: want one only for an estimate from history", line, f.ErrorPercent)
			}
		})
	}
}
