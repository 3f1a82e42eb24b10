package jobs_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/trt"
)

// A trt: candidate on a worker without TensorRT fails as unavailable on
// that platform; the graph's other candidates still run and one wins, the
// run finishes, and the worker is not marked broken (issue 8, item 5).
func TestTRTCandidateOnWorkerWithoutTensorRT(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	var broken atomic.Int32
	reg := backend.Registry{
		"ort": ort.New(ort.Options{}),
		"trt": trt.New(trt.Options{Executable: filepath.Join(t.TempDir(), "trtexec"), OnBrokenWorker: func(error) { broken.Add(1) }}),
	}
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := jobs.StartEmbedded(jobs.WorkerConfig{Store: store, Backends: reg, Queues: []string{"cpu"}, Concurrency: 2, WorkDir: t.TempDir(), RetryUnit: testRetryUnit})
	if err != nil {
		t.Fatal(err)
	}
	client := jobs.NewClient(e.Redis, store)
	t.Cleanup(func() { client.Close(); e.Close() })
	o := submitOptions(t, strategy.MaxThroughput, "trt:fp16,ort:cpu:basic")
	o.Backends = reg
	sub, err := client.Submit(context.Background(), open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	st := wait(t, client.Runs(), sub.Run)
	if st.Status != runstate.RunDone {
		t.Fatalf("run %+v", st)
	}
	for g, gs := range st.Graphs {
		if gs.Winner != "ort:cpu:basic" || gs.Attempts != 1 {
			t.Errorf("graph %s: %+v, want ort:cpu:basic to win at the first attempt", g, gs)
		}
	}
	if broken.Load() != 0 {
		t.Errorf("the worker was marked broken %d times", broken.Load())
	}
}
