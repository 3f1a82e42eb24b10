package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/history"
)

// producer history's table counts each run's unstable measurements
// (marked) and ends with a footnote when there are any; a change between
// measurements marks the unstable side's figures.
func TestPrintHistoryMarksUnstable(t *testing.T) {
	t.Parallel()
	bench := func(ms float64, stable bool) *history.Bench {
		b := &history.Bench{BatchSize: 1, Samples: 100, MeanMs: ms, P50Ms: ms, P90Ms: 1.1 * ms, P99Ms: 1.2 * ms, CV: 0.05, Throughput: 1000 / ms, Stable: stable}
		if !stable {
			b.UnstableCause = "rounds disagree (±7.0 % > ±5 %)"
		}
		return b
	}
	entry := func(run string, day int, b *history.Bench) *history.Entry {
		return &history.Entry{Run: run, Status: "done", Created: time.Date(2026, 12, day, 2, 0, 0, 0, time.UTC),
			Platform: "cpu", Graphs: []history.Graph{{Name: "0", Status: "done", Candidate: "ort:cpu:all", Bench: b}}}
	}
	tests := []struct {
		name      string
		before    *history.Bench
		now       *history.Bench
		unstable  []string // the UNSTABLE cell of each row
		footnote  bool
		changeHas string
	}{
		{"stable both", bench(1, true), bench(10, true), []string{"0", "0"}, false, "throughput 1000 → 100/s"},
		{"unstable now", bench(1, true), bench(10, false), []string{"0", "1~"}, true, "throughput 1000 → 100~/s"},
		{"unstable before", bench(1, false), bench(10, true), []string{"1~", "0"}, true, ", before unstable: rounds disagree (±7.0 % > ±5 %)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := []*history.Entry{entry("m-1", 1, tt.before), entry("m-2", 2, tt.now)}
			rows := []historyRow{{Entry: list[0]}, {Entry: list[1], Changes: history.Compare(list[0], list[1])}}
			var out bytes.Buffer
			cmd := &cobra.Command{}
			cmd.SetOut(&out)
			if err := printHistory(cmd, rows); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if h := strings.Fields(lines[0]); len(h) < 7 || h[6] != "UNSTABLE" {
				t.Fatalf("header %q", lines[0])
			}
			for i, want := range tt.unstable {
				// CREATED is three fields (date, time, zone).
				if f := strings.Fields(lines[1+i]); len(f) < 9 || f[8] != want {
					t.Errorf("row %d: %q, want UNSTABLE %s", i, lines[1+i], want)
				}
			}
			// The footnote names the unstable run and graph with its cause
			// and the advice that fits it (issue 30).
			run := "m-2"
			if !tt.before.Stable {
				run = "m-1"
			}
			cause := "  " + run + " graph 0: rounds disagree (±7.0 % > ±5 %): " + backend.Advice("rounds disagree")
			if got := strings.Contains(out.String(), "\n~ unstable (1 graph measurement(s)): ") && strings.Contains(out.String(), "\n"+cause+"\n"); got != tt.footnote {
				t.Errorf("footnote %v, want %v:\n%s", got, tt.footnote, out.String())
			}
			if !strings.Contains(out.String(), "! m-2 graph 0 slower: ") || !strings.Contains(out.String(), tt.changeHas) {
				t.Errorf("the change does not say %q:\n%s", tt.changeHas, out.String())
			}
		})
	}
}
