package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// worker tune's table marks the best throughput of a candidate whose
// measurement was unstable, and ends with a footnote only when one was.
func TestPrintResultsMarksUnstable(t *testing.T) {
	t.Parallel()
	cause := func(stable bool, cv float64) string {
		if stable {
			return ""
		}
		return fmt.Sprintf("cv %.2f > 0.10", cv)
	}
	passed := func(name string, stable bool, cv float64) backend.CandidateResult {
		return backend.CandidateResult{Candidate: name, Status: backend.StatusPassed, BuildTime: 1500 * time.Millisecond,
			Benchmarks: []backend.Stats{
				{BatchSize: 1, Throughput: 100, P50Ms: 10, P99Ms: 12, CV: 0.01, Stable: true},
				{BatchSize: 4, Throughput: 320, P50Ms: 12.5, P99Ms: 20, CV: cv, Stable: stable, UnstableCause: cause(stable, cv)},
			}}
	}
	// The cause is shown, with the advice that fits it (issue 30: the
	// footnote listed every possible cause, whichever applied).
	failed := backend.CandidateResult{Candidate: "ort:cpu:basic", Status: backend.StatusFailed,
		Failure: &backend.FailureInfo{Class: backend.FailBuild, Message: "bad op\nmore"}}
	rule := backend.DefaultStopRule()
	tests := []struct {
		name     string
		results  []backend.CandidateResult
		rows     []string
		footnote string
	}{
		{"all stable", []backend.CandidateResult{passed("ort:cpu:all", true, 0.04)}, []string{
			"0 ort:cpu:all passed 1.5s 320 4 12.5 20 0.040 0 winner: highest",
		}, ""},
		{"one unstable", []backend.CandidateResult{passed("ort:cpu:all", false, 0.25), failed}, []string{
			"0 ort:cpu:all passed 1.5s 320~ 4 12.5 20 0.250 0 winner: highest",
			"0 ort:cpu:basic failed - - - - - - - build: bad op",
		}, "~ unstable (1 measurement(s)): what the figure is made of could move it (the rule: docs/measurement.md §3)\n" +
			"  graph 0 ort:cpu:all at batch 4: cv 0.25 > 0.10: its calls vary more than max_cv allows: a quieter machine helps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &tuner.Result{Graph: "0", StopRule: rule, Results: tt.results,
				Winner: &tuner.Winner{Selection: strategy.Selection{Index: 0, Candidate: tt.results[0].Candidate, Reason: "highest"}}}
			var out bytes.Buffer
			printResults(&out, []*tuner.Result{r})
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) < 1+len(tt.rows) {
				t.Fatalf("printed:\n%s", out.String())
			}
			for i, want := range tt.rows {
				if got := strings.Join(strings.Fields(lines[1+i]), " "); got != want {
					t.Errorf("row %d:\n got %q\nwant %q", i, got, want)
				}
			}
			tail := lines[1+len(tt.rows):]
			switch {
			case tt.footnote == "" && len(tail) != 0:
				t.Errorf("unexpected lines after the table: %q", tail)
			case tt.footnote != "" && (len(tail) != 2 || strings.Join(tail, "\n") != tt.footnote):
				t.Errorf("footnote %q, want it to start %q", tail, tt.footnote)
			}
		})
	}
}

// A slow model's figures print in human units, never "0~" (issue 19: the
// table printed 0~ samples/s while the winner's note said 0.1), and a
// measurement the cap cut short says how many calls it rests on.
func TestPrintResultsSlowModel(t *testing.T) {
	t.Parallel()
	slow := backend.CandidateResult{Candidate: "ort:cpu:all", Status: backend.StatusPassed, Benchmarks: []backend.Stats{
		{BatchSize: 1, Samples: 1, Throughput: 0.1, MeanMs: 10000, P50Ms: 10000, P99Ms: 10000, Short: true, StopReason: backend.StopTimeCap},
	}}
	r := &tuner.Result{Graph: "0", StopRule: backend.DefaultStopRule(), Results: []backend.CandidateResult{slow},
		Winner: &tuner.Winner{Selection: strategy.Selection{Index: 0, Candidate: "ort:cpu:all", Reason: "highest throughput 0.1 samples/s at batch 1"}}}
	var out bytes.Buffer
	printResults(&out, []*tuner.Result{r})
	row := strings.Join(strings.Fields(strings.Split(out.String(), "\n")[1]), " ")
	if want := "0 ort:cpu:all passed - 0.1~ 1 10k 10k 0.000 measured from 1 winner:"; !strings.HasPrefix(row, want) {
		t.Errorf("row\n %q\nwant it to start\n %q", row, want)
	}
}
