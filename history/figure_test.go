package history_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/history"
)

// A change between two nights shows each night's figure as every other
// view shows it: the estimate its decision used, with its interval (which
// contains it), and an unstable side's cause (issue 30). This is the text
// history, the morning report and the webhook print.
func TestMovedTextShowsTheFigureAndItsCause(t *testing.T) {
	rounds := func(ms float64) [][]float64 {
		var out [][]float64
		for r := range 10 {
			var calls []float64
			for j := range 50 {
				calls = append(calls, ms*(1+0.002*float64((r*7+j)%5)))
			}
			out = append(out, calls)
		}
		return out
	}
	before := history.BenchOf(nil, []backend.Stats{backend.SummariseRounds(8, rounds(1))})
	now := history.BenchOf(nil, []backend.Stats{backend.SummariseRounds(8, rounds(2))})
	now.Stable, now.UnstableCause = false, "rounds disagree (±6.0 % > ±5 %)"
	entry := func(run string, day int, b *history.Bench) *history.Entry {
		return &history.Entry{Run: run, Status: "done", Created: time.Date(2026, 12, day, 2, 0, 0, 0, time.UTC),
			Platform: "cpu", Graphs: []history.Graph{{Name: "0", Status: "done", Candidate: "ort:cpu:all", Bench: b}}}
	}
	changes := history.Compare(entry("m-1", 1, before), entry("m-2", 2, now))
	if len(changes) != 1 || changes[0].Kind != "slower" {
		t.Fatalf("changes %+v, want one slower", changes)
	}
	d := changes[0].Detail
	for _, b := range []*history.Bench{before, now} {
		lo, hi, ok := b.Stats().ThroughputInterval()
		if !ok || !(lo <= b.Throughput && b.Throughput <= hi) {
			t.Fatalf("figure %v, interval %v–%v (ok %v)", b.Throughput, lo, hi, ok)
		}
		want := backend.Human(b.Throughput) + history.UnstableMark(b) + " (" + backend.Human(lo) + "–" + backend.Human(hi) + ")"
		if !strings.Contains(d, want) {
			t.Errorf("detail %q lacks the figure with its interval %q", d, want)
		}
	}
	t.Log(d)
	if !strings.Contains(d, ", now unstable: rounds disagree (±6.0 % > ±5 %)") {
		t.Errorf("detail %q does not give the unstable side's cause", d)
	}
}
