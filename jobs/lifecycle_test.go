package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
)

// Every run reaches a final state, whatever dies: these tests break one
// thing each (Redis's memory, a task, a worker, the store) and check that
// the run still ends, exactly once, with the reason.

// submitUnserved submits the three-graph bundle to a queue no worker serves
// yet, so the test can break things before any work happens.
func submitUnserved(t *testing.T, env *env, dir, target string) jobs.Submission {
	t.Helper()
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	o.Target = target
	sub, err := env.client.Submit(context.Background(), open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// Redis restarted without persistence: the run's record is gone while its
// run.json and results are in the store. Submitting again rebuilds the
// record from the store (graphs already done stay done), tunes only what
// was pending, numbers the new attempt after the stored ones (no attempt
// result is overwritten) and finalizes once.
func TestRunLostFromRedisIsRebuiltFromTheStore(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	o := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	sub, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	if st := wait(t, env.client.Runs(), sub.Run); st.Status != runstate.RunDone {
		t.Fatalf("first run %+v", st)
	}
	// Graph 1 as if its worker had not published it yet, no state, and
	// Redis forgets everything.
	for _, k := range []string{artifacts.GraphResultKey(sub.Run, "1"), artifacts.StateKey(sub.Run)} {
		if err := env.store.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.e.Redis.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	again, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != sub.Run || again.Created || !again.Restored || again.Enqueued != 1 {
		t.Fatalf("resubmission %+v, want the same run restored with graph 1 enqueued", again)
	}
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone || st.Finalizations != 1 || !st.Restored {
		t.Fatalf("restored run %+v", st)
	}
	// Attempt 2 is left to an attempt that may have been in flight when
	// Redis was lost (it would write its result later): the new one is 3.
	if g := st.Graphs["1"]; g.Attempts != 3 || !strings.HasSuffix(g.ResultKey, "/attempts/3/result.json") {
		t.Fatalf("graph 1 %+v: its new attempt must follow the stored attempt 1 and the one that may be in flight, not overwrite them", g)
	}
	if g := st.Graphs["0"]; g.Status != runstate.GraphDone || g.Winner == "" {
		t.Fatalf("graph 0 %+v lost its result", g)
	}
}

// A finalize task of an earlier life of the run (archived when Redis had
// lost the run) holds the run's finalize ID; enqueuing finalize again must
// not count the conflict as "already enqueued".
func TestAnArchivedFinalizeDoesNotBlockTheNext(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	sub := submitUnserved(t, env, dir, "later")
	q := asynq.NewClientFromRedisClient(env.e.Redis)
	defer q.Close()
	insp := asynq.NewInspectorFromRedisClient(env.e.Redis)
	stale := asynq.NewTask(jobs.TypeFinalize, []byte(fmt.Sprintf(`{"v":1,"run":%q}`, sub.Run)))
	if _, err := q.Enqueue(stale, asynq.Queue("later"), asynq.TaskID(jobs.FinalizeTaskID(sub.Run, 0))); err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask("later", jobs.FinalizeTaskID(sub.Run, 0)); err != nil {
		t.Fatal(err)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"later"}, Concurrency: 2})
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone || st.Finalizations != 1 {
		t.Fatalf("run %+v, want done once", st)
	}
	if _, err := insp.GetTaskInfo("later", jobs.FinalizeTaskID(sub.Run, 1)); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatal(err)
	}
}

// A graph whose attempts died with their worker while tuning (SIGKILL,
// out of memory: EndTuning never ran) is quarantined once MaxDeaths is
// reached, instead of taking the next worker down.
func TestAGraphThatKillsItsWorkersIsQuarantined(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub := submitUnserved(t, env, dir, "poison")
	runs := env.client.Runs()
	for range 2 { // two deaths: the second BeginTuning counts the first
		n, err := runs.StartAttempt(ctx, sub.Run, "0", "doomed")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runs.BeginTuning(ctx, sub.Run, "0", n); err != nil {
			t.Fatal(err)
		}
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"poison"}, Concurrency: 2, MaxDeaths: 2})
	st := wait(t, runs, sub.Run)
	g := st.Graphs["0"]
	if st.Status != runstate.RunFailed || st.Finalizations != 1 || g.Status != runstate.GraphFailed || !strings.Contains(g.Message, "quarantined") {
		t.Fatalf("run %+v, graph 0 %+v: want graph 0 quarantined", st, g)
	}
	if st.Graphs["1"].Status != runstate.GraphDone || st.Graphs["2"].Status != runstate.GraphDone {
		t.Fatalf("the other graphs must still be tuned: %+v", st.Graphs)
	}
}

// asynq's lease recoverer archives the task of a worker that died on its
// last attempt without calling the error handler; the reconciler records
// its graph as failed, so the run still ends.
func TestReconcilerRecordsAGraphWhoseTaskWasArchived(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub := submitUnserved(t, env, dir, "silent")
	insp := asynq.NewInspectorFromRedisClient(env.e.Redis)
	if err := insp.ArchiveTask("silent", jobs.GraphTaskID(sub.Run, "0")); err != nil {
		t.Fatal(err)
	}
	// A lost task, too: deleted from the queue with its graph pending.
	if err := insp.DeleteTask("silent", jobs.GraphTaskID(sub.Run, "2")); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rec := jobs.NewReconciler(env.e.Redis, env.store, &log)
	rec.MinAge = 0
	reps, err := rec.Run(ctx, sub.Run)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, r := range reps {
		actions[r.Graph] = r.Action
	}
	if actions["0"] != "failed" || actions["2"] != "re-enqueued" || len(reps) != 2 {
		t.Fatalf("repairs %+v, want graph 0 failed and graph 2 re-enqueued", reps)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"silent"}, Concurrency: 2})
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunFailed || st.Done != 2 || st.Failed != 1 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
	if g := st.Graphs["0"]; !strings.Contains(g.Message, "archived") {
		t.Fatalf("graph 0 %+v does not say its task was archived", g)
	}
	if again, err := rec.Run(ctx, sub.Run); err != nil || len(again) != 0 {
		t.Fatalf("a final run needs no repair: %v %v", again, err)
	}
}

// A cancelled run ends as cancelled, once; its state says so and
// latest.json does not move.
func TestCancelEndsTheRunAsCancelled(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub := submitUnserved(t, env, dir, "stopme")
	res, err := env.client.Cancel(ctx, sub.Run)
	if err != nil || len(res.Graphs) != 3 {
		t.Fatalf("cancel %+v %v", res, err)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"stopme"}, Concurrency: 2})
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunCancelled || st.Cancelled != 3 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
	var state state.State
	if err := artifacts.GetJSON(ctx, env.store, artifacts.StateKey(sub.Run), &state); err != nil || state.Status != runstate.RunCancelled {
		t.Fatalf("state %+v %v", state.Status, err)
	}
	if _, err := env.store.Stat(ctx, artifacts.LatestKey("tests.ThreeGraphs", "stopme")); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("latest.json moved for a cancelled run: %v", err)
	}
	if again, err := env.client.Cancel(ctx, sub.Run); err != nil || !again.AlreadyFinal {
		t.Fatalf("cancelling an ended run: %+v %v", again, err)
	}
}

// flakyStore fails what fail says to fail.
type flakyStore struct {
	artifacts.Store
	mu   sync.Mutex
	fail func(op, key string) error
}

func (s *flakyStore) check(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail == nil {
		return nil
	}
	return s.fail(op, key)
}

func (s *flakyStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.check("put", key); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *flakyStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

// Retries are budgeted by time and visible: a graph whose attempts keep
// failing on the store gets one log line per failed attempt, shows its
// last error while pending, and gives up when its failures outlast the
// retry budget; the run still finalizes.
func TestRetriesAreLoggedAndBudgetedByTime(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub := submitUnserved(t, env, dir, "flaky")
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(ctx, env.store, artifacts.RunKey(sub.Run), &spec); err != nil {
		t.Fatal(err)
	}
	g0, _ := spec.Manifest.Graph("0")
	onnx := artifacts.BlobKey(spec.Files[g0.ONNX].SHA256)
	store := &flakyStore{Store: env.store, fail: func(op, key string) error {
		if op == "get" && key == onnx {
			return errors.New("503 Service Unavailable (injected)")
		}
		return nil
	}}
	var log testsvc.SyncBuffer
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: env.e.Redis, Store: store, Backends: submitOptions(t, strategy.FirstWins, "ort:cpu:basic").Backends,
		Queues: []string{"flaky"}, Concurrency: 2, WorkDir: t.TempDir(), Warn: &log, RetryBudget: 2 * time.Second, ReconcileEvery: -1,
		RetryUnit: testRetryUnit})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	st := wait(t, env.client.Runs(), sub.Run)
	g := st.Graphs["0"]
	if st.Status != runstate.RunFailed || st.Finalizations != 1 || g.Status != runstate.GraphFailed || !strings.Contains(g.Message, "giving up after") || g.Attempts < 2 {
		t.Fatalf("run %s, graph 0 %+v: want it to give up after retrying", st.Status, g)
	}
	out := log.String()
	if !strings.Contains(out, "attempt 1 failed (infrastructure), will retry: ") || !strings.Contains(out, "503 Service Unavailable (injected)") || !strings.Contains(out, "giving up") {
		t.Fatalf("worker log does not show each failed attempt:\n%s", out)
	}
}

// A finalize that can never succeed (the store refuses the state's key)
// ends the run as failed with the reason instead of leaving it running.
func TestAFinalizeThatCannotSucceedFailsTheRun(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	sub := submitUnserved(t, env, dir, "nofinal")
	store := &flakyStore{Store: env.store, fail: func(op, key string) error {
		if op == "put" && strings.HasSuffix(key, "/state.json") {
			return fmt.Errorf("put %s: %w", key, artifacts.ErrBadKey)
		}
		return nil
	}}
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: env.e.Redis, Store: store, Backends: submitOptions(t, strategy.FirstWins, "ort:cpu:basic").Backends,
		Queues: []string{"nofinal"}, Concurrency: 2, WorkDir: t.TempDir(), ReconcileEvery: -1, RetryUnit: testRetryUnit})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunFailed || !strings.Contains(st.Reason, "finalize failed") || st.Finalizations != 1 {
		t.Fatalf("run %+v, want failed by its finalize", st)
	}
}

// Redis wiped (a restart without persistence) takes the queues and the list
// of running runs with it: the reconciler's next pass finds the unfinished
// runs in the store, rebuilds them and re-enqueues their graphs.
func TestReconcilerFindsRunsAWipedRedisForgot(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	sub := submitUnserved(t, env, dir, "wiped")
	rec := jobs.NewReconciler(env.e.Redis, env.store, nil)
	if _, err := rec.Pass(ctx); err != nil { // marks this Redis as seen
		t.Fatal(err)
	}
	if err := env.e.Redis.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reps, err := rec.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range reps {
		count[r.Action]++
	}
	if count["restored"] != 1 || count["re-enqueued"] != 3 {
		t.Fatalf("repairs %v, want the run restored and its 3 graphs re-enqueued", reps)
	}
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"wiped"}, Concurrency: 2})
	if st := wait(t, env.client.Runs(), sub.Run); st.Status != runstate.RunDone || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
}
