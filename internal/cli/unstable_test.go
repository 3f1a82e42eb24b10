package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/cli"
)

// A real tuning whose measurements cannot be stable (--bench-time 1ns
// stops each after one timed call, fewer than the stop rule's window of
// 20): every passed row of worker tune's table is marked, exactly as
// result.json records each best measurement, and the footnote counts them
// and gives each one's cause: fewer calls than min_calls.
func TestTuneTableMarksRealUnstableMeasurements(t *testing.T) {
	t.Parallel()
	dir := mlpBundle(t)
	out := filepath.Join(t.TempDir(), "result")
	cands := []string{"ort:cpu:basic", "ort:cpu:all"}
	o := worker(t, "tune", dir, "--candidates", strings.Join(cands, ","), "--strategy", "max-throughput",
		"--bench-time", "1ns", "--out", out, "-q")
	o.wantCode(t, cli.ExitOK)
	r := readResult(t, out, "0")
	marked := 0
	for _, c := range r.Results {
		best, ok := c.BestThroughput(0)
		if !ok {
			t.Fatalf("%s has no measurement: %+v", c.Candidate, c)
		}
		if best.Stable || best.Samples >= r.StopRule.Window {
			t.Errorf("%s: best measurement %+v is stable or has a full window after --bench-time 1ns", c.Candidate, best)
		}
		rows := tableRows(o.stdout, "0", c.Candidate)
		if len(rows) != 1 {
			t.Fatalf("%s: rows %q", c.Candidate, rows)
		}
		f := strings.Fields(rows[0])
		if tput := f[4]; strings.HasSuffix(tput, "~") == best.Stable {
			t.Errorf("%s: throughput cell %q, but result.json says stable=%v", c.Candidate, tput, best.Stable)
		} else if !best.Stable {
			marked++
		}
		// The cause is the condition that fired, recorded and shown with
		// the advice that fits it (issue 30), not a list of possibilities.
		if want := fmt.Sprintf("fewer than %d calls (%d)", r.StopRule.MinCalls, best.Samples); best.UnstableCause != want {
			t.Errorf("%s: cause %q, want %q", c.Candidate, best.UnstableCause, want)
		}
		line := fmt.Sprintf("  graph 0 %s at batch %d: %s: %s\n", c.Candidate, best.BatchSize, best.UnstableCause, backend.Advice(best.UnstableCause))
		if !strings.Contains(o.stdout, line) {
			t.Errorf("stdout lacks the footnote line %q:\n%s", line, o.stdout)
		}
	}
	if want := "~ unstable (2 measurement(s)): "; marked != 2 || !strings.Contains(o.stdout, want) {
		t.Errorf("%d rows marked; stdout does not say %q:\n%s", marked, want, o.stdout)
	}
}
