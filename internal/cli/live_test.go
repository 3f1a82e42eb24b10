package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/runstate"
)

// fixedSize is a terminal of width × height.
func fixedSize(width, height int) func() (int, int, error) {
	return func() (int, int, error) { return width, height, nil }
}

// A redraw goes back up over exactly the rows the last draw took (wrapped
// lines counting as the rows they wrap onto) and clears them; the same
// text draws nothing; a notice in between makes the next draw start below.
func TestLiveTableRedrawsInPlace(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	l := &liveTable{w: &out, size: fixedSize(10, 24)}
	steps := []struct {
		text, want string
	}{
		{"a\nb\n", "\r\x1b[Ja\nb\n"},
		{"a\nb\n", ""},                                            // unchanged
		{"a\nc\n", "\x1b[2A\r\x1b[Ja\nc\n"},                       // up two rows
		{"0123456789abcde\n", "\x1b[2A\r\x1b[J0123456789abcde\n"}, // 15 runes on 10 columns: two rows
		{"x\n", "\x1b[2A\r\x1b[Jx\n"},
	}
	for i, s := range steps {
		out.Reset()
		l.draw(s.text)
		if out.String() != s.want {
			t.Errorf("draw %d (%q) wrote %q, want %q", i, s.text, out.String(), s.want)
		}
	}
	l.forget()
	out.Reset()
	l.draw("x\n")
	if out.String() != "\r\x1b[Jx\n" {
		t.Errorf("after forget, draw wrote %q, want a fresh draw", out.String())
	}
}

// A table taller than the terminal is cut to fit, saying so: rows scrolled
// off the screen could not be drawn over.
func TestLiveTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	l := &liveTable{w: &out, size: fixedSize(80, 5)}
	l.draw("1\n2\n3\n4\n5\n6\n7\n")
	got := strings.Split(strings.TrimSuffix(strings.TrimPrefix(out.String(), "\r\x1b[J"), "\n"), "\n")
	if len(got) != 4 || got[2] != "3" || !strings.HasPrefix(got[3], "… 4 more line(s)") {
		t.Fatalf("drew %q", got)
	}
	out.Reset()
	l.draw("1\n")
	if !strings.HasPrefix(out.String(), "\x1b[4A") {
		t.Errorf("redraw wrote %q, want it to go up the 4 rows drawn", out.String())
	}
}

// Plain lines: one per graph that changed, then the run's totals when they
// changed; a graph merely waiting says nothing, and a poll with no change
// prints nothing.
func TestRunLines(t *testing.T) {
	t.Parallel()
	run := func(graphs map[string]runstate.GraphStatus, done int, status string) runstate.RunStatus {
		return runstate.RunStatus{Run: "r", Status: status, Total: 2, Done: done, Graphs: graphs}
	}
	waiting := runstate.GraphStatus{Status: runstate.GraphPending}
	running := runstate.GraphStatus{Status: runstate.GraphPending, State: runstate.StateRunning, Attempts: 1,
		Progress: &runstate.Progress{Worker: "w1", Attempt: 1, Phase: runstate.PhaseBuild, Candidate: "ort:cpu:all", Index: 2, Count: 2}}
	retry := runstate.GraphStatus{Status: runstate.GraphPending, State: runstate.StateRetrying, Attempts: 1, LastClass: "infrastructure", LastError: "store down",
		Task: &runstate.TaskInfo{State: "retry", Retried: 1, LastErr: "store down"}}
	done := runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Bench: &history.Bench{BatchSize: 4, Throughput: 99.5, CV: 0.3, UnstableCause: "cv 0.30 > 0.10"}}
	polls := []struct {
		st   runstate.RunStatus
		want []string
	}{
		{run(map[string]runstate.GraphStatus{"0": waiting, "1": waiting}, 0, runstate.RunRunning),
			[]string{"run r: 0/2 graph(s) finished (0 failed), running"}},
		{run(map[string]runstate.GraphStatus{"0": waiting, "1": waiting}, 0, runstate.RunRunning), nil},
		{run(map[string]runstate.GraphStatus{"0": running, "1": waiting}, 0, runstate.RunRunning),
			[]string{"run r graph 0: running, attempt 1, build ort:cpu:all (2/2) on worker w1"}},
		{run(map[string]runstate.GraphStatus{"0": retry, "1": waiting}, 0, runstate.RunRunning),
			[]string{"run r graph 0: retrying, attempt 1, retried 1, last error: infrastructure: store down"}},
		{run(map[string]runstate.GraphStatus{"0": done, "1": done}, 2, runstate.RunDone), []string{
			"run r graph 0: done, winner ort:cpu:all, 99.5~ samples/s at batch 4 (cv 0.300), unstable: cv 0.30 > 0.10",
			"run r graph 1: done, winner ort:cpu:all, 99.5~ samples/s at batch 4 (cv 0.300), unstable: cv 0.30 > 0.10",
			"run r: 2/2 graph(s) finished (0 failed), done"}},
	}
	var out bytes.Buffer
	l := &runLines{w: &out}
	for i, p := range polls {
		out.Reset()
		l.update(p.st)
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			got = nil
		}
		if strings.Join(got, "\n") != strings.Join(p.want, "\n") {
			t.Errorf("poll %d printed:\n%s\nwant:\n%s", i, strings.Join(got, "\n"), strings.Join(p.want, "\n"))
		}
	}
}
