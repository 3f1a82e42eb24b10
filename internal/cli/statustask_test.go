package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// A graph whose task fails transiently shows, in `producer status RUN`,
// what asynq recorded of its task: its state, how often asynq retried it
// and its last error, in the table and in -o json. The failure is real: a
// real worker on real Redis reaches the run's versitygw store through a
// proxy that refuses connections once the worker has started (the store
// went down), an infrastructure failure, retried.
func TestStatusShowsTheTaskAsynqRetries(t *testing.T) {
	url := testsvc.Redis(t)
	store, s3 := s3Store(t)
	proxy := testsvc.StartProxy(t, strings.TrimPrefix(s3.Endpoint, "http://"))
	workerStore := fmt.Sprintf("s3://%s?endpoint=http://%s&region=%s", s3.Bucket, proxy.Addr, s3.Region)

	wk := startWorkerRun(t, url, workerStore, "cpu")
	waitFor(t, 2*time.Minute, "the worker to start", func() bool { return strings.Contains(wk.log.String(), "serving queues cpu") }, &wk.log)
	proxy.Refuse(true)
	proxy.Reset()

	run := submitRun(t, mlpBundle(t), "--redis", url, "--store", store, "--target", "cpu",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic")

	status := func() (runstate.RunStatus, outcome) {
		o := producer(t, "status", run, "--redis", url, "--store", store, "-o", "json")
		o.wantCode(t, cli.ExitOK)
		var st runstate.RunStatus
		if err := json.Unmarshal([]byte(o.stdout), &st); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, o)
		}
		return st, o
	}
	// Two retries: the count moves, and is asynq's (the worker's attempts
	// are counted apart).
	waitFor(t, 3*time.Minute, "asynq to record a second retry", func() bool {
		st, _ := status()
		task := st.Graphs["0"].Task
		return task != nil && task.Retried >= 2
	}, &wk.log)
	// With the worker gone, the task rests (retry, or pending if it was
	// handed back on shutdown): what status shows cannot move under it.
	wk.stop()
	st, _ := status()
	g := st.Graphs["0"]
	task := g.Task
	if g.Status != runstate.GraphPending || task == nil || task.Retried < 2 || task.ID != jobs.GraphTaskID(run, "0") || task.Queue != "cpu" ||
		(task.State != "retry" && task.State != "pending") || !strings.Contains(task.LastErr, "run.json") || task.LastFailedAt.IsZero() {
		t.Fatalf("graph 0: %+v, task %+v: want pending, its task retried at least twice with the error that names run.json", g, task)
	}
	text := producer(t, "status", run, "--redis", url, "--store", store)
	text.wantCode(t, cli.ExitOK)
	var row []string
	for _, line := range strings.Split(text.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "0" {
			row = f
		}
	}
	// GRAPH STATUS WINNER SAMPLES/S BATCH CV SPEEDUP ATTEMPTS RETRIED NOTE…:
	// STATUS is the one view of the graph, made with its task's state.
	wantState := map[string]string{"retry": runstate.StateRetrying, "pending": runstate.StateQueued}[task.State]
	if len(row) < 10 || g.State != wantState || row[1] != wantState || row[8] != itoa(task.Retried) ||
		!strings.Contains(text.stdout, "last error: infrastructure: ") || !strings.Contains(text.stdout, "run.json") {
		t.Errorf("status table does not show the graph %s (its task %s), %d retries and last error:\n%s", wantState, task.State, task.Retried, text.stdout)
	}
	// Not on a terminal, --watch prints plain lines: the graph's, then the
	// run's totals, once each while nothing changes.
	w := producer(t, "status", run, "--redis", url, "--store", store, "--watch", "--timeout", "3s")
	w.wantCode(t, cli.ExitFailed)
	want := fmt.Sprintf("run %s graph 0: %s, attempt %d, retried %d, last error: infrastructure: ", run, wantState, g.Attempts, task.Retried)
	if strings.Count(w.stderr, want) != 1 || strings.Count(w.stderr, "run "+run+": 0/1 graph(s) finished (0 failed), running\n") != 1 ||
		strings.Contains(w.stdout, "\x1b[") {
		t.Errorf("status --watch off a terminal: want one line %q and one of the run's totals, no escapes:\n%s", want, w)
	}
}

// waitFor polls cond until it holds, failing the test after limit (a
// generous one: the machine may be loaded) with log's contents.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, log *testsvc.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; worker:\n%s", limit, what, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
