package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/compare"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// One measurement is one figure (issue 30): a real tuning's winner is
// shown with the figure its decision used — the selection's value, the
// headline of its result — in the run's table and its note, in compare
// (JSON and table), in report.html and in history, and every measurement's
// interval contains its own figure. Before, compare recomputed its figure
// from the rounds (3.93M where the rest said 3.91M), and an interval from
// the rounds' lower quartiles could exclude a figure that was the trimmed
// mean of every call.
func TestOneFigureEverywhere(t *testing.T) {
	t.Parallel()
	b := slowBundle(t)
	storeDir := filepath.Join(t.TempDir(), "store")
	store := "file://" + storeDir
	sub := producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:all,ort:cpu:disabled",
		"--strategy", "max-throughput", "--bench-time", "400ms", "--store", store)
	sub.wantCode(t, cli.ExitOK)
	runs, err := os.ReadDir(filepath.Join(storeDir, "runs"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs in the store: %v, %v", runs, err)
	}
	run := runs[0].Name()
	r, err := tuner.ReadResult(filepath.Join(storeDir, "runs", run, "graphs", "0", tuner.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if r.Winner == nil {
		t.Fatalf("no winner: %+v", r)
	}
	head, ok := strategy.Headline(&r.Winner.Selection, r.Results[r.Winner.Index].Benchmarks)
	if !ok {
		t.Fatal("the winner has no headline measurement")
	}
	if r.Winner.Value != head.Throughput {
		t.Errorf("the decision's value %v is not the headline figure %v", r.Winner.Value, head.Throughput)
	}
	fig := backend.Human(head.Throughput)
	t.Logf("winner %s: %s samples/s at batch %d; %s", r.Winner.Candidate, fig, head.BatchSize, r.Winner.Reason)

	// Every measurement's interval contains its figure.
	for _, c := range r.Results {
		for _, st := range c.Benchmarks {
			if lo, hi, ok := st.ThroughputInterval(); ok && !(lo <= st.Throughput && st.Throughput <= hi) {
				t.Errorf("%s at batch %d: figure %s outside its interval %s–%s", c.Candidate, st.BatchSize,
					backend.Human(st.Throughput), backend.Human(lo), backend.Human(hi))
			}
		}
	}

	// The run's table (what status prints) and its note.
	var row []string
	for _, line := range strings.Split(sub.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "0" && f[1] == "done" {
			row = f
		}
	}
	if row == nil || strings.TrimSuffix(row[3], "~") != fig || !strings.Contains(strings.Join(row, " "), " "+fig+" samples/s at batch") {
		t.Errorf("the run's row %q does not show %s (and its note the same figure):\n%s", row, fig, sub.stdout)
	}

	// compare, JSON and table.
	cj := producer(t, "compare", run, run, "--store", store, "-o", "json")
	cj.wantCode(t, cli.ExitOK)
	var c compare.Comparison
	if err := json.Unmarshal([]byte(cj.stdout), &c); err != nil || len(c.Graphs) != 1 {
		t.Fatalf("compare -o json: %v:\n%s", err, cj.stdout)
	}
	if a := c.Graphs[0].A; a.Throughput != head.Throughput || !(a.Lo <= a.Throughput && a.Throughput <= a.Hi) {
		t.Errorf("compare's figure %v (%v–%v), want %v within its interval", a.Throughput, a.Lo, a.Hi, head.Throughput)
	}
	ct := producer(t, "compare", run, run, "--store", store)
	ct.wantCode(t, cli.ExitOK)
	if !strings.Contains(ct.stdout, " "+fig+" (") {
		t.Errorf("compare's table does not show %s:\n%s", fig, ct.stdout)
	}

	// report.html: the graph's row and the winner's candidate row.
	html, err := os.ReadFile(filepath.Join(storeDir, "runs", run, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), `<td class="num">`+fig); n < 2 {
		t.Errorf("report.html shows %s in %d cell(s), want the graph's and the winner's", fig, n)
	}

	// history.
	hj := producer(t, "history", r.Model, "--platform", "cpu", "--store", store, "-o", "json")
	hj.wantCode(t, cli.ExitOK)
	var rows []struct {
		Entry struct {
			Graphs []struct {
				Name  string `json:"name"`
				Bench *struct {
					Throughput float64 `json:"throughput"`
				} `json:"bench"`
			} `json:"graphs"`
		} `json:"entry"`
	}
	if err := json.Unmarshal([]byte(hj.stdout), &rows); err != nil || len(rows) != 1 || len(rows[0].Entry.Graphs) != 1 || rows[0].Entry.Graphs[0].Bench == nil {
		t.Fatalf("history -o json: %v:\n%s", err, hj.stdout)
	}
	if got := rows[0].Entry.Graphs[0].Bench.Throughput; got != head.Throughput {
		t.Errorf("history's figure %v, want %v", got, head.Throughput)
	}
}
