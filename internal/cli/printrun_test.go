package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
)

func TestPrintRun(t *testing.T) {
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := jobs.RunStatus{Run: "m-1", Model: "m", Target: "cpu", Status: jobs.RunFailed, StateKey: "runs/m-1/state.json",
		Reason: "graph 1: wrong_answer: output 0 differs",
		Graphs: map[string]jobs.GraphStatus{
			"0": {Status: jobs.GraphDone, Winner: "ort:cpu:all", Reason: "highest throughput 10.0 samples/s at batch 1", Attempts: 2},
			"1": {Status: jobs.GraphFailed, Class: "wrong_answer", Message: "output 0 differs\nat [3]", Attempts: 1},
		}}
	var out bytes.Buffer
	printRun(&out, st, store.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"run", "m-1", "(model", "m,", "target", "cpu):", "failed"},
		{"GRAPH", "STATUS", "WINNER", "ATTEMPTS", "NOTE"},
		{"0", "done", "ort:cpu:all", "2", "highest", "throughput", "10.0", "samples/s", "at", "batch", "1"},
		{"1", "failed", "-", "1", "wrong_answer:", "output", "0", "differs"},
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
