package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
)

// The stack the queue tests share: a real redis-server, a real S3 server
// (versitygw), a worker run in process, and submit's one run.

// submitRun runs `producer submit ARGS... -o json`, wants exit 0 and one
// submission, and returns its run id.
func submitRun(t testing.TB, args ...string) string {
	t.Helper()
	sub := producer(t, append(append([]string{"submit"}, args...), "-o", "json")...)
	sub.wantCode(t, cli.ExitOK)
	var out struct {
		Submissions []jobs.Submission `json:"submissions"`
	}
	if err := json.Unmarshal([]byte(sub.stdout), &out); err != nil || len(out.Submissions) != 1 {
		t.Fatalf("submit -o json: want one submission (%v)\n%s", err, sub)
	}
	return out.Submissions[0].Run
}

// redisClient is a client of the test's Redis at url, closed at the end.
func redisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// s3Store starts a real S3 server (versitygw) with its bucket, puts its
// credentials in the environment for the test, and returns its --store
// URL and the server.
func s3Store(t *testing.T) (string, artifacts.S3Config) {
	t.Helper()
	s3 := testsvc.S3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	return fmt.Sprintf("s3://%s?endpoint=%s&region=%s", s3.Bucket, s3.Endpoint, s3.Region), s3
}

// workerRun is a `worker run` started in process for a test.
type workerRun struct {
	log    testsvc.SyncBuffer // its stderr
	cancel context.CancelFunc
	exited chan int
}

// startWorkerRun starts `worker run --redis url --store store --queues
// queue --shutdown-timeout 5s ARGS...` in process; it stops at the end of
// the test, or earlier with stop.
func startWorkerRun(t testing.TB, url, store, queue string, args ...string) *workerRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &workerRun{cancel: cancel, exited: make(chan int, 1)}
	var out testsvc.SyncBuffer
	go func() {
		w.exited <- cli.ExecuteContext(ctx, cli.NewWorker(), append([]string{"run", "--redis", url, "--store", store,
			"--queues", queue, "--shutdown-timeout", "5s"}, args...), &out, &w.log)
	}()
	t.Cleanup(w.stop)
	return w
}

// stop stops the worker and waits for it to exit (again: a no-op).
func (w *workerRun) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.exited
		w.cancel = nil
	}
}

// mlpFleet is a fleet file of one model, mlp (the bundle dir), on target,
// with extra top-level lines (classes:, notify:).
func mlpFleet(dir, target, extra string) string {
	return fmt.Sprintf("format: tunefleet.fleet/v1\n%sdefaults:\n  targets: [%s]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: mlp\n    bundle: %s\n", extra, target, dir)
}

// fleetFile writes a fleet file into a new temporary directory.
func fleetFile(t testing.TB, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// openSamples opens the bundle dir and reads the recorded samples of its
// graph.
func openSamples(t testing.TB, dir, graph string) (*bundle.Bundle, []bundle.Sample) {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := b.Samples(graph)
	if err != nil {
		t.Fatal(err)
	}
	return b, samples
}
