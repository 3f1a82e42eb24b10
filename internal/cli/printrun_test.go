package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/noise"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

func TestPrintRun(t *testing.T) {
	t.Parallel()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := runstate.RunStatus{Run: "m-1", Model: "m", Target: "cpu", Status: runstate.RunFailed, StateKey: "runs/m-1/state.json",
		Reason: "graph 1: wrong_answer: output 0 differs",
		Graphs: map[string]runstate.GraphStatus{
			"0": {Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "highest throughput 10.0 samples/s at batch 1", Attempts: 2,
				Bench: &history.Bench{BatchSize: 1, Throughput: 10, CV: 0.02, Stable: true}},
			"1": {Status: runstate.GraphFailed, Class: "wrong_answer", Message: "output 0 differs\nat [3]", Attempts: 1},
		}}
	var out bytes.Buffer
	printRun(&out, st, store.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"run", "m-1", "(model", "m,", "target", "cpu):", "failed"},
		{"GRAPH", "STATUS", "WINNER", "SAMPLES/S", "BATCH", "CV", "SPEEDUP", "ATTEMPTS", "RETRIED", "NOTE"},
		{"0", "done", "ort:cpu:all", "10", "1", "0.020", "-", "2", "-", "highest", "throughput", "10.0", "samples/s", "at", "batch", "1"},
		{"1", "failed", "-", "-", "-", "-", "-", "1", "-", "wrong_answer:", "output", "0", "differs"},
	}
	if len(lines) != len(want)+2 {
		t.Fatalf("printed %d lines:\n%s", len(lines), out.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
	if !strings.HasSuffix(lines[4], "/runs/m-1/state.json") || lines[5] != "reason: "+st.Reason {
		t.Errorf("tail:\n%s\n%s", lines[4], lines[5])
	}
}

// Each kind of graph row: the winner's figures (marked when unstable, with
// a footnote), a pending graph's task as asynq records it.
func TestPrintRunRows(t *testing.T) {
	t.Parallel()
	now := time.Now()
	retry := &runstate.TaskInfo{State: "retry", Retried: 3, MaxRetry: 1 << 20, LastErr: "run r graph 2: infrastructure failure: store down",
		NextProcessAt: now.Add(time.Hour)}
	tests := []struct {
		name     string
		gs       runstate.GraphStatus
		row      string // the fields after the graph's name, space-joined
		footnote bool
	}{
		{"stable winner", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "highest throughput 1234.5 samples/s at batch 4", Attempts: 1,
			Bench: &history.Bench{BatchSize: 4, Throughput: 1234.5, CV: 0.031, Stable: true}},
			"done ort:cpu:all 1234 4 0.031 - 1 - highest throughput 1234.5 samples/s at batch 4", false},
		{"unstable winner", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "highest throughput 1234.5 samples/s at batch 4", Attempts: 1,
			Bench: &history.Bench{BatchSize: 4, Throughput: 1234.5, CV: 0.412, UnstableCause: "cv 0.41 > 0.10"}},
			"done ort:cpu:all 1234~ 4 0.412 - 1 - highest throughput 1234.5 samples/s at batch 4; unstable: cv 0.41 > 0.10", true},
		{"unstable, recorded before causes were", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "r", Attempts: 1,
			Bench: &history.Bench{BatchSize: 4, Throughput: 1234.5, CV: 0.012}},
			"done ort:cpu:all 1234~ 4 0.012 - 1 - r; unstable: cause not recorded", true},
		{"reused winner, with its speedup", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "reused: highest throughput", Attempts: 1,
			Bench: &history.Bench{BatchSize: 4, Throughput: 1234.5, CV: 0.031, Stable: true}, ReusedFrom: "m-0",
			Speedup: &strategy.Speedup{Baseline: "ort:cpu:disabled", Ratio: noise.Ratio{Value: 2.5, Lo: 2.4, Hi: 2.6, Rounds: 5, Paired: true}}},
			"done ort:cpu:all 1234 4 0.031 2.5× 1 - reused: highest throughput; measured by run m-0; speedup 2.5× (2.4–2.6) over ort:cpu:disabled", false},
		{"a speedup within noise", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:all", Reason: "r", Attempts: 1,
			Speedup: &strategy.Speedup{Baseline: "ort:cpu:basic", Ratio: noise.Ratio{Value: 1.02, Lo: 0.97, Hi: 1.07, Rounds: 5}}},
			"done ort:cpu:all - - - ~1.02× 1 - r; speedup ~1.02× (0.97–1.07) over ort:cpu:basic", false},
		{"winner recorded without figures", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:basic", Reason: "first candidate to pass"},
			"done ort:cpu:basic - - - - 0 - first candidate to pass", false},
		{"retrying, as asynq records it", runstate.GraphStatus{Status: runstate.GraphPending, Attempts: 4, LastClass: "infrastructure", LastError: "older words", Task: retry},
			"retrying - - - - - 4 3 next try in 1h0m0s; last error: infrastructure: run r graph 2: infrastructure failure: store down", false},
		{"retrying, asynq's record gone", runstate.GraphStatus{Status: runstate.GraphPending, Attempts: 2, LastClass: "timeout", LastError: "candidate ran 10m"},
			"queued - - - - - 2 - last error: timeout: candidate ran 10m", false},
		{"waiting for a worker", runstate.GraphStatus{Status: runstate.GraphPending, Task: &runstate.TaskInfo{State: "pending"}},
			"queued - - - - - 0 0", false},
		// One state: asynq's "active" with the worker's progress is running,
		// the progress in the note; without a slot it is waiting.
		{"running", runstate.GraphStatus{Status: runstate.GraphPending, Attempts: 1, Task: &runstate.TaskInfo{State: "active"},
			Progress: &runstate.Progress{Worker: "w1", Attempt: 1, Phase: runstate.PhaseCheck, Candidate: "ort:cpu:all", Index: 2, Count: 3,
				PhaseSince: now.Add(-time.Hour), AttemptSince: now.Add(-2 * time.Hour)}},
			"running - - - - - 1 0 check ort:cpu:all (2/3) on worker w1, 1h0m0s in check, 2h0m0s in attempt 1", false},
		{"prefetched", runstate.GraphStatus{Status: runstate.GraphPending, Attempts: 1, Task: &runstate.TaskInfo{State: "active"},
			Progress: &runstate.Progress{Worker: "w2", Attempt: 1, Phase: runstate.PhaseWaiting, PhaseSince: now.Add(-time.Hour), AttemptSince: now.Add(-time.Hour)}},
			"waiting (prefetched by worker w2) - - - - - 1 0 waiting for a slot on worker w2, 1h0m0s in waiting, 1h0m0s in attempt 1", false},
		{"cancelled", runstate.GraphStatus{Status: runstate.GraphCancelled, Class: "cancelled", Message: "the run was cancelled"},
			"cancelled - - - - - 0 - cancelled: the run was cancelled", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := runstate.RunStatus{Run: "r", Model: "m", Target: "cpu", Status: runstate.RunRunning, Graphs: map[string]runstate.GraphStatus{"g": tt.gs}}
			var out bytes.Buffer
			printRun(&out, st, "file:///s")
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if got := strings.Join(strings.Fields(lines[2]), " "); got != "g "+tt.row {
				t.Errorf("row:\n got %q\nwant %q", got, "g "+tt.row)
			}
			foot := len(lines) > 3 && strings.HasPrefix(lines[3], "~ unstable (1 graph(s)):")
			if foot != tt.footnote || len(lines) != 3+2*btoi(tt.footnote) {
				t.Errorf("footnote %v, want %v:\n%s", foot, tt.footnote, out.String())
			}
			if foot && !strings.HasPrefix(lines[4], "  graph g: "+tt.gs.Bench.Stats().Cause()+": ") {
				t.Errorf("the footnote does not give graph g's cause %q:\n%s", tt.gs.Bench.Stats().Cause(), out.String())
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
