package faults_test

import (
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/stack"
	"github.com/tunefleet/tunefleet/internal/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
)

// Workers reach Redis and S3 through fault proxies that add latency and
// reset every connection every 2 s while the run is in flight: the run
// completes.
func TestFlakyNetwork(t *testing.T) {
	sc := begin(t, 7, "fault proxies between workers and Redis/S3: 5 ms latency per chunk, all connections reset every 2 s (5 times)")
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
	for range 5 {
		time.Sleep(2 * time.Second)
		rp.Reset()
		sp.Reset()
	}
	if rp.Resets()+sp.Resets() == 0 {
		t.Fatal("the proxies never had a connection to reset: the test proves nothing")
	}
	s.WaitFinal(run, leaseWait)
	checkRun(t, sc, s, run, want{status: jobs.RunDone, model: model})
	wantStatusLine(t, sc, s, run, "done")
}
