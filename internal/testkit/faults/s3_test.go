package faults_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// s3Fault runs a one-graph bundle on a worker whose S3 link goes through a
// fault proxy, and calls inject as the worker starts its first blob upload
// (the proxy holds that upload until inject returns).
func s3Fault(t *testing.T, s *stack.Stack, model string, inject func()) (run string, w *stack.Worker) {
	t.Helper()
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8))
	proxy := testsvc.StartProxy(t, s.Bucket.Endpoint[len("http://"):])
	uploading := proxy.FreezeOn("PUT /" + s.Bucket.Bucket + "/blobs/")
	w = s.StartWorker(stack.WorkerOptions{Store: s.S3URL("http://" + proxy.Addr)})
	run, _ = s.Submit(dir, "--candidates", "ort:cpu:basic")
	select {
	case <-uploading:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the worker never uploaded a blob:\n%s", w.Log())
	}
	inject()
	proxy.Thaw()
	return run, w
}

// versitygw killed while a worker uploads, started again once the attempt
// has failed (past minio-go's own retries, about 10 s): the attempt fails
// as infrastructure, is retried, and the run completes.
func TestS3KilledMidTransfer(t *testing.T) {
	sc := begin(t, 6, "SIGKILL versitygw at the worker's first blob PUT, start it again once attempt 1 has failed")
	s := stack.New(t, stack.Options{})
	const model = "faults.S3Killed"
	run, w := s3Fault(t, s, model, func() { s.S3.Kill(t) })
	// The server stays down until the worker has given up on the attempt
	// (the event a fixed 30 s sleep used to outwait): a server back within
	// minio-go's own retries would prove nothing about the retry.
	failed := regexp.MustCompile(`run \S+ graph 0 attempt 1 failed \(infrastructure\), will retry: `)
	stack.Poll(t, leaseWait, "attempt 1 failed in the worker log", func() (bool, string) {
		return failed.MatchString(w.Log()), w.Log()
	})
	if st, _ := s.Runs().Get(context.Background(), run); st.Final() {
		t.Fatalf("run %+v finished while versitygw was down", st)
	}
	s.S3.Start(t)
	s.WaitFinal(run, leaseWait)
	checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	wantMatch(t, sc, "worker log", w.Log(), failed.String())
}

// versitygw frozen (SIGSTOP) for 20 s while a worker uploads, then thawed:
// the run finalizes and no graph fails.
func TestS3FrozenMidTransfer(t *testing.T) {
	sc := begin(t, 6, "SIGSTOP versitygw at the worker's first blob PUT for 20 s, then SIGCONT")
	s := stack.New(t, stack.Options{})
	const model = "faults.S3Frozen"
	run, _ := s3Fault(t, s, model, func() { s.S3.Freeze(t) })
	time.Sleep(20 * time.Second)
	s.S3.Thaw(t)
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if st.Failed != 0 {
		t.Errorf("run %+v: a graph failed over a 20 s freeze", st)
	}
	sc.assert("no graph failed")
	wantStatusLine(t, sc, s, run, "done")
}
