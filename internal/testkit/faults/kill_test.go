package faults_test

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/runstate"
)

// leaseWait bounds a wait that includes asynq's lease recovery of a dead
// worker's task (a 30 s lease, a recoverer every 60 s: about 65 s, more on
// a loaded machine) and the run after it.
const leaseWait = 6 * time.Minute

// notFinal fails the test when the run already finished: the fault came
// too late to prove anything.
func notFinal(t *testing.T, s *stack.Stack, run string) {
	t.Helper()
	if st, err := s.Runs().Get(context.Background(), run); err == nil && st.Final() {
		t.Fatalf("run %s finished before the fault: the test proves nothing: %+v", run, st)
	}
}

// A worker SIGKILLed while its trtexec builds: after the lease expires, a
// second worker runs the task again and the run finalizes once.
func TestWorkerKilledMidBuild(t *testing.T) {
	sc := begin(t, 1, "SIGKILL the worker while trtexec (the stand-in) hangs in the build")
	s := stack.New(t, stack.Options{})
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	const model = "faults.KilledMidBuild"
	b, samples := stack.TRTBundle(t, model)
	hanging, working, hangPID := stack.HangingAndWorkingTRT(t, b, samples)
	trtexec := []string{"--trtexec", trtreplay.Executable(t)}
	a := s.StartWorker(stack.WorkerOptions{TRT: hanging, Args: trtexec})
	run, _ := s.Submit(b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s")
	stack.WaitPIDFile(t, hangPID, 2*time.Minute)
	a.Kill()
	notFinal(t, s, run)
	// The lease is aged rather than waited for (stack.ExpireLeases): the
	// next worker recovers the task as it starts, not a minute later.
	s.ExpireLeases()
	s.StartWorker(stack.WorkerOptions{TRT: working, Args: trtexec})
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if g := st.Graphs["0"]; g.Attempts != 2 || g.Winner != "trt:fp16" {
		t.Errorf("graph 0 %+v, want trt:fp16 on a second attempt", g)
	}
	text := s.Producer("status", run)
	// The winner, its samples/s, batch, CV and speedup, then two attempts.
	wantMatch(t, sc, "producer status", text.Stdout, `(?m)^0\s+done\s+trt:fp16\s+\S+\s+\S+\s+\S+\s+\S+\s+2\b`)
}

// A worker SIGKILLed while it uploads its engine (its S3 link frozen by the
// fault proxy at the first blob PUT): the upload never completes, a second
// worker redoes the task, and nothing half-written is left.
func TestWorkerKilledMidUpload(t *testing.T) {
	sc := begin(t, 2, "freeze the worker's S3 link at its first blob PUT, SIGKILL it, thaw")
	s := stack.New(t, stack.Options{})
	const model = "faults.KilledMidUpload"
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8))
	proxy := testsvc.StartProxy(t, s.Bucket.Endpoint[len("http://"):])
	uploading := proxy.FreezeOn("PUT /" + s.Bucket.Bucket + "/blobs/")
	a := s.StartWorker(stack.WorkerOptions{Store: s.S3URL("http://" + proxy.Addr)})
	run, _ := s.Submit(dir, "--candidates", "ort:cpu:basic")
	select {
	case <-uploading:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the worker never uploaded a blob:\n%s", a.Log())
	}
	a.Kill()
	proxy.Thaw()
	notFinal(t, s, run)
	// This scenario alone waits for asynq's real lease expiry (about 65 s,
	// in parallel with the others): the rest age it (stack.ExpireLeases).
	s.StartWorker(stack.WorkerOptions{})
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if g := st.Graphs["0"]; g.Attempts != 2 {
		t.Errorf("graph 0 %+v, want a second attempt", g)
	}
	text := s.Producer("status", run)
	wantMatch(t, sc, "producer status", text.Stdout, `(?m)^0\s+done\s+ort:cpu:basic\s+\S+\s+\S+\s+\S+\s+\S+\s+2\b`)
}

// A task that kills its worker on every attempt (a fresh worker each time)
// is quarantined after --max-deaths deaths: its graph fails with the
// reason, and the run finalizes failed once instead of staying running.
func TestWorkerDiesOnEveryAttempt(t *testing.T) {
	sc := begin(t, 3, "SIGKILL every worker that starts the task (--max-deaths 2)")
	s := stack.New(t, stack.Options{})
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	const model = "faults.Poison"
	b, samples := stack.TRTBundle(t, model)
	hanging, _, hangPID := stack.HangingAndWorkingTRT(t, b, samples)
	opts := stack.WorkerOptions{TRT: hanging, Args: []string{"--trtexec", trtreplay.Executable(t), "--max-deaths", "2"}}
	run, _ := s.Submit(b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s")
	for death := 1; death <= 2; death++ {
		w := s.StartWorker(opts)
		stack.WaitPIDFile(t, hangPID, leaseWait)
		w.Kill()
		os.Remove(hangPID)
		notFinal(t, s, run)
		// Aged, not waited for (stack.ExpireLeases): the next worker
		// recovers the task as it starts, not a minute later.
		s.ExpireLeases()
	}
	last := s.StartWorker(opts)
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunFailed, model: model})
	g := st.Graphs["0"]
	if g.Status != "failed" || g.Class != "infrastructure" || !regexp.MustCompile(`quarantined`).MatchString(g.Message) {
		t.Errorf("graph 0 %+v, want failed (infrastructure) with a message saying it was quarantined", g)
	}
	text := s.Producer("status", run)
	wantLine(t, sc, "producer status", text.Stdout, "quarantined")
	if last.Exited() {
		t.Errorf("the worker that quarantined the task exited:\n%s", last.Log())
	}
}

// wantMatch is wantLine for a regular expression.
func wantMatch(t *testing.T, sc *scenario, where, text, expr string) {
	t.Helper()
	if !regexp.MustCompile(expr).MatchString(text) {
		t.Errorf("%s does not match %q; it says:\n%s", where, expr, text)
	}
	sc.assert("message: " + where)
}
