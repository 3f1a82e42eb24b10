package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// Workers reach Redis and S3 through fault proxies that add latency and
// reset every connection every 300 ms while the run is in flight: the
// run completes.
func TestFlakyNetwork(t *testing.T) {
	sc := begin(t, 7, "fault proxies between workers and Redis/S3: 5 ms latency per chunk, every connection reset every 300 ms while the run is in flight")
	s := stack.New(t, stack.Options{})
	const model = "faults.FlakyNetwork"
	dir := threeGraphs(t, model)
	rp := testsvc.StartProxy(t, s.Redis.Addr)
	sp := testsvc.StartProxy(t, s.Bucket.Endpoint[len("http://"):])
	for _, p := range []*testsvc.Proxy{rp, sp} {
		p.SetLatency(5 * time.Millisecond)
	}
	opts := stack.WorkerOptions{Redis: "redis://" + rp.Addr + "/0", Store: s.S3URL("http://" + sp.Addr)}
	s.StartWorker(opts)
	s.StartWorker(opts)
	run, _ := s.Submit(dir, slowCandidates...)
	// Reset every connection every 300 ms for as long as the run is in
	// flight (bounded: the wait below fails the test if it never ends).
	inFlight := 0
	for range 2000 {
		if st, err := s.Runs().Get(context.Background(), run); err == nil && st.Final() {
			break
		}
		if rp.Reset()+sp.Reset() > 0 {
			inFlight++
		}
		time.Sleep(300 * time.Millisecond)
	}
	if inFlight < 2 {
		t.Fatalf("connections were reset %d time(s) while the run was in flight: the test proves too little", inFlight)
	}
	t.Logf("connections reset %d time(s) while the run was in flight", inFlight)
	s.WaitFinal(run, leaseWait)
	checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	wantStatusLine(t, sc, s, run, "done")
}
