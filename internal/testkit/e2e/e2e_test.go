package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// A worker process is this test binary in stack's worker role.
const (
	workerEnv    = tstack.WorkerEnv
	workerTRTEnv = tstack.WorkerTRTEnv
)

// TestMain serves the roles of stack.Main: every process the tests start
// (worker, trtexec stand-in, ONNX Runtime session child) is this binary.
// The tests run in parallel (each its own Redis, bucket and queue): they
// mostly wait for worker processes, so they need not queue behind
// GOMAXPROCS (2 on CI).
func TestMain(m *testing.M) { tstack.Main(m, tstack.MainOptions{MinParallel: 8}) }

// stack is one Redis, one S3 bucket and the URLs that reach them.
type stack struct {
	rdb   redis.UniversalClient // see client
	redis string
	store string
	s3    artifacts.S3Config
	queue string
	// env carries the bucket's credentials to the producer and worker
	// processes: in their environment, never on a command line, and
	// never in this process's (t.Setenv would keep the tests serial).
	env []string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	orttest.Need(t)
	s := &stack{redis: testsvc.Redis(t), s3: testsvc.S3(t)}
	s.store = fmt.Sprintf("s3://%s?endpoint=%s&region=%s", s.s3.Bucket, s.s3.Endpoint, s.s3.Region)
	// Credentials travel in the environment, never in a command line.
	s.env = []string{"AWS_ACCESS_KEY_ID=" + s.s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.s3.SecretKey}
	// A queue of its own, so tests sharing one Redis do not see each other.
	s.queue = "e2e-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(s.queue) > 60 {
		s.queue = s.queue[:60]
	}
	return s
}

// producer runs `producer ARGS` on the stack, as a process of this test
// binary with the stack's credentials in its environment.
func producer(t *testing.T, s *stack, args ...string) (int, string, string) {
	t.Helper()
	r := tstack.RunProducer(t, s.env, append(args, "--redis", s.redis, "--store", s.store)...)
	return r.Code, r.Stdout, r.Stderr
}

// worker starts a worker process serving the stack's queue.
type workerProc struct {
	cmd *exec.Cmd
	log *bytes.Buffer
}

func startWorker(t *testing.T, s *stack, extra ...string) *workerProc {
	t.Helper()
	return startWorkerEnv(t, s, nil, extra...)
}

// startWorkerEnv starts a worker process with env added to its
// environment.
func startWorkerEnv(t *testing.T, s *stack, env []string, extra ...string) *workerProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--redis", s.redis, "--store", s.store, "--queues", s.queue, "--concurrency", "1", "-v"}, extra...)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(append(os.Environ(), s.env...), env...), workerEnv+"="+strings.Join(args, "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &workerProc{cmd: cmd, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = w.log, w.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("worker %d log:\n%s", cmd.Process.Pid, w.log.String())
		}
	})
	return w
}

// modelBundle makes a bundle of the given fixture models, one graph each,
// with reference outputs from ONNX Runtime.
func modelBundle(t *testing.T, model string, models ...*onnxtest.Builder) string {
	t.Helper()
	return tstack.ModelBundle(t, model, models...)
}

type submitOut struct {
	Submissions []jobs.Submission    `json:"submissions"`
	Runs        []runstate.RunStatus `json:"runs"`
}

func submit(t *testing.T, s *stack, bundleDir string, extra ...string) (int, submitOut, string) {
	t.Helper()
	args := append([]string{"submit", bundleDir, "--target", s.queue, "--allow-unserved", "-o", "json", "--bench-time", "30ms"}, extra...)
	code, out, errs := producer(t, s, args...)
	var so submitOut
	if code == 0 || strings.HasPrefix(strings.TrimSpace(out), "{") {
		if err := json.Unmarshal([]byte(out), &so); err != nil {
			t.Fatalf("submit output %q: %v (stderr %s)", out, err, errs)
		}
	}
	return code, so, errs
}

func openStore(t *testing.T, s *stack) artifacts.Store {
	t.Helper()
	st, err := artifacts.NewS3(s.s3)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// client is the stack's Redis client for the test's own checks, opened
// once and closed when the test ends.
func (s *stack) client(t *testing.T) redis.UniversalClient {
	t.Helper()
	if s.rdb == nil {
		rdb, err := runstate.ConnectRedis(context.Background(), s.redis)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		s.rdb = rdb
	}
	return s.rdb
}

func (s *stack) runs(t *testing.T) *runstate.Runs { return runstate.NewRuns(s.client(t)) }

func queueInfo(t *testing.T, s *stack) *asynq.QueueInfo {
	t.Helper()
	info, err := asynq.NewInspectorFromRedisClient(s.client(t)).GetQueueInfo(s.queue)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// wantArchivedOnce checks that a graph's task failed permanently: archived
// at once, never retried.
func wantArchivedOnce(t *testing.T, s *stack, run, graph string) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(s.client(t))
	// The run can end (its last graph finalized inline) while the task's
	// handler is still returning: wait for asynq to take the task back.
	var info *asynq.TaskInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if info, err = insp.GetTaskInfo(s.queue, jobs.GraphTaskID(run, graph)); err != nil {
			t.Fatal(err)
		}
		if info.State != asynq.TaskStateActive || time.Now().After(deadline) {
			break
		}
	}
	if info.State != asynq.TaskStateArchived || info.Retried != 0 {
		t.Errorf("task %v retried %d, want archived, never retried", info.State, info.Retried)
	}
}

func TestTwoWorkersOneStateFetchedByteForByte(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := modelBundle(t, "e2e.ThreeGraphs", onnxtest.MLP(64, 32, 8), onnxtest.ConvNet(), onnxtest.TwoInputs())
	startWorker(t, s)
	startWorker(t, s)
	code, so, errs := submit(t, s, dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--wait")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	if len(so.Runs) != 1 || so.Runs[0].Status != runstate.RunDone || so.Runs[0].Finalizations != 1 || so.Runs[0].Done != 3 {
		t.Fatalf("runs %+v", so.Runs)
	}
	runID := so.Submissions[0].Run

	// The state's engine digests verify against the blobs in S3.
	store := openStore(t, s)
	ctx := context.Background()
	state, _, err := artifacts.ReadState(ctx, store, "e2e.ThreeGraphs", s.queue, "")
	if err != nil {
		t.Fatal(err)
	}
	if state.Run != runID || len(state.Graphs) != 3 {
		t.Fatalf("state run %s graphs %d", state.Run, len(state.Graphs))
	}
	out := filepath.Join(t.TempDir(), "deploy")
	code, stdout, errs := producer(t, s, "fetch", "e2e.ThreeGraphs", "--platform", s.queue, "--out", out)
	if code != 0 {
		t.Fatalf("fetch exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, runID) {
		t.Fatalf("fetch output %q does not name run %s", stdout, runID)
	}
	for _, g := range state.Graphs {
		got, err := os.ReadFile(filepath.Join(out, "engines", g.Name, g.Engine.File))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := store.Get(ctx, g.Engine.Key)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, want) || int64(len(got)) != g.Engine.Size {
			t.Fatalf("graph %s: fetched engine differs from the stored blob", g.Name)
		}
	}
	stateBytes, _ := os.ReadFile(filepath.Join(out, artifacts.StateFile))
	rc, _ := store.Get(ctx, artifacts.StateKey(runID))
	stored, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(stateBytes, stored) {
		t.Fatal("fetched state.json differs from the stored one")
	}

	// The same submission again enqueues nothing.
	code, so2, errs := submit(t, s, dir, "--candidates", "ort:cpu:basic,ort:cpu:extended")
	if code != 0 {
		t.Fatalf("resubmit exit %d: %s", code, errs)
	}
	if so2.Submissions[0].Run != runID || so2.Submissions[0].Created || so2.Submissions[0].Enqueued != 0 {
		t.Fatalf("resubmission %+v", so2.Submissions[0])
	}
	if info := queueInfo(t, s); info.Pending+info.Active+info.Scheduled+info.Retry != 0 {
		t.Fatalf("queue after resubmission: %+v", info)
	}
}

func TestKilledWorkerTaskIsPickedUpAndFinalizedOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	// Worker A must die inside the task, whatever the machine's speed: its
	// trtexec (the stand-in) hangs in the engine build and writes a pid
	// file when it is there, so the kill lands mid-task by construction,
	// not by a sleep racing a fast benchmark. Worker B's trtexec works.
	b, samples, _ := trtBundle(t, "e2e.Killed")
	cfgA, cfgB, hangPID := hangingAndWorkingTRT(t, b, samples)
	a := startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgA}, "--trtexec", trtreplay.Executable(t))
	code, so, errs := submit(t, s, b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	runID := so.Submissions[0].Run
	runs := s.runs(t)
	// Wait until worker A's build hangs, then kill A (and its session
	// children) without warning. The stand-in dies with A (the parent-death
	// signal); the helper it left sleeping is killed here.
	waitAttempt(t, runs, runID, "0", 1)
	helper := waitPIDFile(t, hangPID)
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })
	syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	a.cmd.Wait()
	if st, _ := runs.Get(context.Background(), runID); st.Final() {
		t.Fatalf("the run finished before the worker was killed; the test proves nothing: %+v", st)
	}
	// A second worker picks the task up once its lease has expired (asynq's
	// recoverer: 30 s lease, checked as a worker starts and every minute).
	// The lease is aged rather than waited for (tstack.ExpireLeases): B
	// recovers the task as it starts instead of a minute later.
	tstack.ExpireLeases(t, s.client(t), s.queue)
	startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgB}, "--trtexec", trtreplay.Executable(t))
	st := waitFinal(t, runs, runID, 4*time.Minute)
	if st.Status != runstate.RunDone || st.Finalizations != 1 {
		t.Fatalf("run %+v, want done and finalized exactly once", st)
	}
	if g := st.Graphs["0"]; g.Attempts != 2 || g.Winner != "trt:fp16" {
		t.Fatalf("graph 0 %+v, want a second attempt", g)
	}
	// No corrupt or duplicate objects: every blob's content matches its
	// name, and the run has one result per graph and one state.
	store := openStore(t, s)
	ctx := context.Background()
	keys, err := store.List(ctx, "blobs/sha256/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ref := artifacts.Ref{SHA256: strings.TrimPrefix(k, "blobs/sha256/")}
		info, err := store.Stat(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		ref.Size = info.Size
		if err := artifacts.FetchFile(ctx, store, ref, filepath.Join(t.TempDir(), "blob")); err != nil {
			t.Fatalf("blob %s: %v", k, err)
		}
	}
	runKeys, err := store.List(ctx, "runs/"+runID+"/")
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 1 died before writing a result; attempt 2's is published as
	// the graph's result.json.
	want := []string{"runs/" + runID + "/graphs/0/attempts/2/result.json", "runs/" + runID + "/graphs/0/result.json", "runs/" + runID + "/report.html", "runs/" + runID + "/run.json", "runs/" + runID + "/state.json"}
	if strings.Join(runKeys, ",") != strings.Join(want, ",") {
		t.Fatalf("run objects %v, want %v", runKeys, want)
	}
}

func TestDeterministicFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := modelBundle(t, "e2e.Wrong", onnxtest.MLP(64, 32, 8))
	// Break the reference output: every candidate now gives a wrong answer.
	p := filepath.Join(dir, "graphs", "0", "graphs", "0", "samples", "0", "output_0.pb")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0x40
	os.WriteFile(p, data, 0o644)
	startWorker(t, s)
	code, so, _ := submit(t, s, dir, "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--wait")
	if code != cli.ExitFailed {
		t.Fatalf("submit exit %d, want %d for a failed run", code, cli.ExitFailed)
	}
	st := so.Runs[0]
	g := st.Graphs["0"]
	if st.Status != runstate.RunFailed || g.Class != "wrong_answer" || g.Attempts != 1 {
		t.Fatalf("run %+v graph %+v", st, g)
	}
	wantArchivedOnce(t, s, st.Run, "0")
}

// Not parallel: its producer runs in this process, with the credentials
// (and a wrong one) in this process's environment.
func TestServiceErrorsNameWhatToFix(t *testing.T) {
	s := newStack(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s.s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.s3.SecretKey)
	dir := modelBundle(t, "e2e.Errors", onnxtest.MLP(64, 32, 8))
	bucketURL := func(bucket string) string {
		return fmt.Sprintf("s3://%s?endpoint=%s&region=%s", bucket, s.s3.Endpoint, s.s3.Region)
	}
	for _, tc := range []struct {
		name  string
		redis string
		store string
		env   map[string]string
		want  []string
	}{
		{"redis unreachable", "redis://127.0.0.1:1/0", s.store, nil, []string{"redis at redis://127.0.0.1:1/0 is unreachable", "--redis"}},
		{"s3 unreachable", s.redis, "s3://tuning?endpoint=http://127.0.0.1:1", nil, []string{"127.0.0.1:1"}},
		{"missing bucket", s.redis, bucketURL("no-such-bucket-tunefleet"), nil, []string{"no-such-bucket-tunefleet", "does not exist"}},
		{"bad credentials", s.redis, s.store, map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong"}, []string{"rejected the credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := cli.Execute(cli.NewProducer(), []string{"submit", dir, "--target", s.queue, "--allow-unserved", "--redis", tc.redis, "--store", tc.store}, &out, &errb)
			if code == 0 {
				t.Fatal("exit 0")
			}
			msg := errb.String()
			if strings.Count(strings.TrimSpace(msg), "\n") != 0 {
				t.Errorf("want one line, got %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestWorkerHealthAndGracefulShutdownHandsTaskBack(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	// As in the killed-worker test, worker A's trtexec hangs in the build,
	// so the shutdown lands mid-task by construction.
	b, samples, _ := trtBundle(t, "e2e.Graceful")
	cfgA, cfgB, hangPID := hangingAndWorkingTRT(t, b, samples)
	port := freePort(t)
	a := startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgA}, "--trtexec", trtreplay.Executable(t),
		"--health", fmt.Sprintf("127.0.0.1:%d", port), "--shutdown-timeout", "1s")
	// Health answers once the worker is up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never answered 200: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, so, errs := submit(t, s, b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	runID := so.Submissions[0].Run
	runs := s.runs(t)
	waitAttempt(t, runs, runID, "0", 1)
	helper := waitPIDFile(t, hangPID)
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })
	// SIGTERM: the worker stops, kills trtexec's process group, and hands
	// the task back to the queue at once (no lease to wait for).
	a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("worker exit after SIGTERM: %v\n%s", err, a.log)
	}
	for gone := time.Now().Add(30 * time.Second); alive(helper); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(gone) {
			t.Errorf("trtexec's helper %d outlived the worker's shutdown", helper)
			break
		}
	}
	if st, _ := runs.Get(context.Background(), runID); st.Final() {
		t.Fatal("the run finished before the shutdown; the test proves nothing")
	}
	if info := queueInfo(t, s); info.Pending != 1 {
		t.Fatalf("queue after shutdown %+v, want the task pending again", info)
	}
	startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgB}, "--trtexec", trtreplay.Executable(t))
	if st := waitFinal(t, runs, runID, 2*time.Minute); st.Status != runstate.RunDone || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}
}

// waitAttempt waits until a graph's task is on its n-th attempt.
func waitAttempt(t *testing.T, runs *runstate.Runs, run, graph string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := runs.Get(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Graphs[graph].Attempts >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("graph %s never reached attempt %d: %+v", graph, n, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A worker takes one task beyond its slots (prefetch): a task whose work
// is indexed completes at once, even while the worker's only slot is held
// by a build that does not end.
func TestIndexedResultDoesNotWaitForABusySlot(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	x, xs, _ := trtBundle(t, "e2e.Indexed")
	y, _, _ := trtBundle(t, "e2e.Hangs", bundletest.WithSamples(1)) // other samples: other work
	cfgA, cfgB, hangPID := hangingAndWorkingTRT(t, x, xs)
	runs := s.runs(t)
	// Worker B (working trtexec) tunes X, which indexes its result.
	b := startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgB}, "--trtexec", trtreplay.Executable(t))
	if code, _, errs := submit(t, s, x.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--wait"); code != 0 {
		t.Fatalf("first run of X: exit %d: %s", code, errs)
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
	// Worker A, one slot: Y's build hangs in it.
	startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgA}, "--trtexec", trtreplay.Executable(t), "--concurrency", "1")
	code, so, errs := submit(t, s, y.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins")
	if code != 0 {
		t.Fatalf("submit Y: exit %d: %s", code, errs)
	}
	runY := so.Submissions[0].Run
	helper := waitPIDFile(t, hangPID)
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })
	// X again, as a new run: A reuses the indexed result without the slot.
	code, so, errs = submit(t, s, x.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--force")
	if code != 0 {
		t.Fatalf("submit X again: exit %d: %s", code, errs)
	}
	st := waitFinal(t, runs, so.Submissions[0].Run, 30*time.Second)
	if g := st.Graphs["0"]; st.Status != runstate.RunDone || !strings.HasPrefix(g.Reason, "reused: ") {
		t.Fatalf("X again: %+v, graph %+v, want done by reuse", st, g)
	}
	if sy, _ := runs.Get(context.Background(), runY); sy.Final() {
		t.Fatalf("Y finished (%+v): its build was to hang, so the test proves nothing", sy)
	}
}

// hangingAndWorkingTRT writes two trtexec stand-in configs for a bundle
// with the given samples: cfgA's engine build hangs (and writes its
// helper's pid to hangPID once it is there), cfgB's works.
func hangingAndWorkingTRT(t *testing.T, b *bundle.Bundle, samples []bundle.Sample) (cfgA, cfgB, hangPID string) {
	t.Helper()
	return tstack.HangingAndWorkingTRT(t, b, samples)
}

// alive tells whether a process is running (not gone, not a zombie).
func alive(pid int) bool { return tstack.Alive(pid) }

// waitPIDFile waits until a hanging trtexec stand-in has written its
// helper's pid.
func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	return tstack.WaitPIDFile(t, path, time.Minute)
}

// waitFinal waits until a run is finalized, for at most limit.
func waitFinal(t *testing.T, runs *runstate.Runs, run string, limit time.Duration) runstate.RunStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := runs.Get(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not finalized after %v: %+v", run, limit, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
