package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// A graph whose task is archived without the handler completing it (here:
// run.json names no blob for one of its files, a permanent error) is
// recorded as failed, so the run still finalizes instead of running forever.
func TestArchivedTaskStillFinalizesItsRun(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = "broken" // no worker serves it yet
	sub, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(ctx, env.store, artifacts.RunKey(sub.Run), &spec); err != nil {
		t.Fatal(err)
	}
	g0, _ := spec.Manifest.Graph("0")
	delete(spec.Files, g0.ONNX)
	if err := artifacts.PutJSON(ctx, env.store, artifacts.RunKey(sub.Run), spec); err != nil {
		t.Fatal(err)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"broken"}, Concurrency: 2})
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunFailed || st.Failed != 1 || st.Done != 2 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
	if g := st.Graphs["0"]; g.Status != runstate.GraphFailed || g.Message == "" {
		t.Fatalf("graph 0 %+v, want failed with the reason", g)
	}
}

// When every graph finished but finalize was never enqueued (the worker
// died in between), submitting the same run again repairs it.
func TestResubmittingRepairsALostFinalize(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = "lost" // no worker serves it
	sub, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"0", "1", "2"} {
		if _, _, err := env.client.Runs().CompleteGraph(ctx, sub.Run, g, runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(env.e.Redis)
	if _, err := insp.GetTaskInfo("lost", jobs.FinalizeTaskID(sub.Run, 0)); err == nil {
		t.Fatal("finalize exists before the repair; the test proves nothing")
	}
	again, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != sub.Run || again.Enqueued != 0 {
		t.Fatalf("resubmission %+v", again)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := insp.GetTaskInfo("lost", jobs.FinalizeTaskID(sub.Run, 0)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("resubmitting did not enqueue the lost finalize")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
