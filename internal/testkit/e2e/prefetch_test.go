package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// TestPrefetchLeavesTheNextTaskToAnIdleWorker: three `worker run`
// processes of one slot each with the default --prefetch 1, live and idle
// on real redis-server and versitygw, and a queue that fills at once
// (paused while six runs are submitted, then resumed once every worker is
// registered, with a wake as an enqueue sends) with three long
// graphs first, as a planned night enqueues its longest first, then three
// short ones. The long graphs must tune at the same time, one on each
// worker: before the
// claim gate, the worker that polled first claimed the head task and, at
// once, the second one too (its prefetch), which then waited for the first
// to end while the other worker took the short ones (issue 30: two of a
// night's three longest graphs back to back on one worker).
func TestPrefetchLeavesTheNextTaskToAnIdleWorker(t *testing.T) {
	t.Parallel()
	s := tstack.New(t, tstack.Options{})
	insp := asynq.NewInspectorFromRedisClient(s.Client())
	queue := jobs.Queue(s.Queue)
	if err := insp.PauseQueue(queue); err != nil {
		t.Fatal(err)
	}
	const workers = 3
	for range workers {
		s.StartWorker(tstack.WorkerOptions{})
	}
	// Six models, six runs, in this order in the queue.
	var runs []string
	for i := range 2 * workers {
		m, bench := onnxtest.Slow(384), "1500ms"
		if i >= workers {
			m, bench = onnxtest.MLP(64, 32, 8), "30ms"
		}
		run, _ := s.Submit(modelBundle(t, fmt.Sprintf("m%d", i), m), "--bench-time", bench)
		runs = append(runs, run)
	}
	// Every worker up (its slot registered, which it does once serving
	// and listening for wakes) before the queue opens: a worker still
	// starting under load is not an idle one.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		n, err := runstate.LiveSlots(context.Background(), s.Client(), s.Queue, time.Now().Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if n == workers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers registered after a minute", n, workers)
		}
	}
	if err := insp.UnpauseQueue(queue); err != nil {
		t.Fatal(err)
	}
	// The queue filled at once, as a night's enqueue fills it, and the
	// workers hear of it as they hear of an enqueue: a wake. (Each submit
	// above woke them while the queue was paused; without this the idle
	// workers would find the tasks after their quiet wait, up to
	// --idle-poll, one at a time, which under load let a worker's prefetch
	// take a long graph before the last idle worker asked; no night fills
	// a queue without a wake.)
	if err := s.Client().Publish(context.Background(), jobs.WakeChannel, queue).Err(); err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end time.Time }
	spans := make([]span, len(runs))
	for i, run := range runs {
		if st := s.WaitFinal(run, 3*time.Minute); st.Status != "done" {
			t.Fatalf("run %d %s: %+v", i, run, st)
		}
		var r tuner.Result
		if err := artifacts.GetJSON(context.Background(), s.Store(), artifacts.GraphResultKey(run, "0"), &r); err != nil {
			t.Fatal(err)
		}
		spans[i] = span{r.StartedAt, r.StartedAt.Add(r.Duration)}
	}
	for i := range workers {
		for j := range i {
			a, b := spans[j], spans[i]
			if !b.start.Before(a.end) || !a.start.Before(b.end) {
				t.Errorf("long graphs %d and %d ran one after the other (%s–%s, %s–%s): one waited behind the other on one worker while another was idle",
					j, i, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"))
			}
		}
	}
}
