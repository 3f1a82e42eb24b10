package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// The pod of a KEDA ScaledJob runs `worker run --max-tasks 1 --prefetch 0
// --idle-exit D`: it takes one task, runs it to the end and exits 0,
// leaving the other tasks pending for the pods started for them; and a pod
// whose task another pod took exits 0 after D instead of holding a GPU.
// Real Redis, a real versitygw store, a real ONNX Runtime tune.
func TestWorkerRunMaxTasksAndIdleExit(t *testing.T) {
	url := testsvc.Redis(t)
	store, _ := s3Store(t)
	rdb := redisClient(t, url)

	run := func(args ...string) (code int, stderr string, took time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out, errb testsvc.SyncBuffer
		start := time.Now()
		code = cli.ExecuteContext(ctx, cli.NewWorker(), append([]string{"run", "--redis", url, "--store", store,
			"--queues", "cpu", "--shutdown-timeout", "5s"}, args...), &out, &errb)
		if ctx.Err() != nil {
			t.Fatalf("worker run %v did not exit on its own within 3 minutes:\n%s", args, errb.String())
		}
		return code, errb.String(), time.Since(start)
	}

	// Nothing queued: out after --idle-exit.
	code, stderr, took := run("--idle-exit", "1s")
	if code != cli.ExitOK || took > time.Minute {
		t.Fatalf("idle worker: exit %d after %s, want 0 soon after 1s:\n%s", code, took, stderr)
	}

	// Two runs of one graph each queued: one task, then out.
	b := mlpBundle(t)
	for _, extra := range [][]string{nil, {"--force"}} {
		producer(t, append([]string{"submit", b, "--redis", url, "--store", store, "--target", "cpu",
			"--strategy", "first-wins", "--candidates", "ort:cpu:basic"}, extra...)...).wantCode(t, cli.ExitOK)
	}
	pending := func() int64 { n, _ := rdb.LLen(context.Background(), "asynq:{cpu}:pending").Result(); return n }
	before := pending()
	if before < 2 {
		t.Fatalf("%d tasks pending after two submissions, want at least 2", before)
	}
	code, stderr, _ = run("--max-tasks", "1", "--prefetch", "0", "--idle-exit", "10m")
	if code != cli.ExitOK {
		t.Fatalf("worker --max-tasks 1: exit %d, want 0:\n%s", code, stderr)
	}
	if after := pending(); after != before-1 {
		t.Errorf("pending went from %d to %d: want exactly one task taken (and none handed back half-done)\n%s", before, after, stderr)
	}
	if n, _ := rdb.LLen(context.Background(), "asynq:{cpu}:active").Result(); n != 0 {
		t.Errorf("%d tasks left active: the worker exited with its task unfinished\n%s", n, stderr)
	}
	if strings.Count(stderr, "handed back") > 0 {
		t.Errorf("a task was handed back: --max-tasks must let its task end first\n%s", stderr)
	}
}

func TestWorkerRunLifecycleFlagsChecked(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--max-tasks", "-1"}, {"--idle-exit", "-1s"}, {"--poll-interval", "0s"}, {"--poll-interval", "100us"}} {
		o := worker(t, append([]string{"run", "--redis", "redis://127.0.0.1:1/0", "--queues", "cpu"}, args...)...)
		o.wantCode(t, cli.ExitUsage)
		if !strings.Contains(o.stderr, args[0]) {
			t.Errorf("worker run %s: the error does not name the flag:\n%s", strings.Join(args, " "), o.stderr)
		}
	}
}
