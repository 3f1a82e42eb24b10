package e2e_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/trtreplay"
	"github.com/tunefleet/tunefleet/jobs"
)

// `producer cancel` stops a graph in flight: the worker's trtexec (here a
// stand-in whose build hangs) is killed with its process group within a
// few seconds, the run ends cancelled exactly once, latest.json does not
// move, and the worker goes on serving.
func TestCancelStopsAGraphInFlight(t *testing.T) {
	s := newStack(t)
	trtreplay.FixtureDir(t)
	b, samples, _ := trtBundle(t, "e2e.Cancelled")
	cfgA, _, hangPID := hangingAndWorkingTRT(t, b, samples)
	w := startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgA}, "--trtexec", trtreplay.Executable(t))
	code, so, errs := submit(t, s, b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	runID := so.Submissions[0].Run
	runs := s.runs(t)
	waitAttempt(t, runs, runID, "0", 1)
	helper := waitPIDFile(t, hangPID)
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })

	code, out, errs := producer(t, s, "cancel", runID)
	if code != 0 || !strings.Contains(out, "cancelled, 1 pending graph(s) dropped") {
		t.Fatalf("cancel exit %d: %s%s", code, out, errs)
	}
	st := waitFinal(t, runs, runID, time.Minute)
	if st.Status != jobs.RunCancelled || st.Finalizations != 1 || st.Graphs["0"].Status != jobs.GraphCancelled {
		t.Fatalf("run %+v, want cancelled once", st)
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive(helper) {
		if time.Now().After(deadline) {
			t.Fatalf("the hanging trtexec (pid %d) still runs after the cancel", helper)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := openStore(t, s).Stat(context.Background(), artifacts.LatestKey("e2e.Cancelled", s.queue)); err == nil {
		t.Fatal("latest.json moved for a cancelled run")
	}
	if w.cmd.ProcessState != nil {
		t.Fatalf("the worker exited: %v", w.cmd.ProcessState)
	}
}
