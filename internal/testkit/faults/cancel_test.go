package faults_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/runstate"
)

// `producer cancel` while a worker is stuck in a build that never ends:
// the build's trtexec is killed, the run ends cancelled, finalized once,
// latest.json untouched, and the worker is free again.
func TestCancelStuckRun(t *testing.T) {
	sc := begin(t, 10, "producer cancel while the worker's trtexec (the stand-in) hangs in the build")
	s := stack.New(t, stack.Options{})
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	const model = "faults.Cancelled"
	b, samples := stack.TRTBundle(t, model)
	hanging, _, hangPID := stack.HangingAndWorkingTRT(t, b, samples)
	w := s.StartWorker(stack.WorkerOptions{TRT: hanging, Args: []string{"--trtexec", trtreplay.Executable(t)}})
	run, _ := s.Submit(b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s")
	helper := stack.WaitPIDFile(t, hangPID, 2*time.Minute)
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })
	r := s.Producer("cancel", run)
	if r.Code != 0 {
		t.Fatalf("producer cancel: %v", r)
	}
	wantLine(t, sc, "producer cancel", r.Stdout, "run "+run+": cancelled")
	s.WaitFinal(run, leaseWait)
	checkRun(t, sc, s, run, want{status: runstate.RunCancelled, model: model})
	wantStatusLine(t, sc, s, run, "cancelled")
	// The attempt in flight stopped: its trtexec was killed with its
	// process group.
	stack.Poll(t, 30*time.Second, "the hanging trtexec to be killed by the cancel", func() (bool, string) {
		return !stack.Alive(helper), ""
	})
	if w.Exited() {
		t.Errorf("the worker exited on the cancel:\n%s", w.Log())
	}
}
