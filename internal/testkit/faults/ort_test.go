package faults_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
)

// An ONNX Runtime session child that crashes fails its candidate; the
// worker lives on and the run finalizes with the other candidate.
func TestORTChildCrash(t *testing.T) {
	sc := begin(t, 9, "the worker's first ONNX Runtime session child dies by SIGSEGV")
	s := stack.New(t, stack.Options{})
	const model = "faults.ORTCrash"
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8))
	marker := filepath.Join(t.TempDir(), "crashed")
	w := s.StartWorker(stack.WorkerOptions{Env: []string{stack.CrashORTEnv + "=" + marker}})
	run, _ := s.Submit(dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--strategy", "max-throughput")
	s.WaitFinal(run, 3*time.Minute)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no session child crashed (%v): the test proves nothing", err)
	}
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if g := st.Graphs["0"]; g.Winner != "ort:cpu:extended" {
		t.Errorf("graph 0 %+v, want ort:cpu:extended to win after ort:cpu:basic's child crashed", g)
	}
	if w.Exited() {
		t.Errorf("the worker died with its session child:\n%s", w.Log())
	}
	sc.assert("worker alive")
	res, err := artifacts.ReadObject(context.Background(), s.Store(), artifacts.GraphResultKey(run, "0"), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	wantLine(t, sc, "result.json", string(res), "SIGSEGV")
}
