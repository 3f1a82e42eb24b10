package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// Options configures a stack.
type Options struct {
	// PersistRedis runs redis-server with an fsynced append-only file.
	PersistRedis bool
	// StoreDir, when set, is a local (file://) store instead of S3.
	StoreDir string
	// RedisURL, when set, is a Redis the test started itself (a Cluster
	// or a Sentinel set, testsvc.OwnRedisCluster/OwnRedisSentinel) that
	// the stack uses instead of a redis-server of its own; Redis is nil
	// then.
	RedisURL string
}

// Stack is one redis-server, one store (a versitygw bucket or a local
// directory) and the addresses that reach them, for one test.
type Stack struct {
	t     *testing.T
	Redis *testsvc.RedisServer // nil with Options.RedisURL
	S3    *testsvc.S3Server    // nil with a local store
	// Bucket is the S3 store's config (zero with a local store).
	Bucket artifacts.S3Config
	// RedisURL and StoreURL are what workers and commands get unless told
	// otherwise (a test may route a worker through a fault proxy).
	RedisURL, StoreURL string
	// Queue is the target class of this stack's runs: a queue of its own.
	Queue string
	// Env holds the store's credentials, for the processes only.
	Env []string

	mu  sync.Mutex
	rdb redis.UniversalClient
}

// New starts a stack for t: a redis-server and a versitygw of its own
// (never shared ones: fault tests kill them). It skips (fails under CI)
// without ONNX Runtime, redis-server or versitygw.
func New(t *testing.T, opts Options) *Stack {
	t.Helper()
	orttest.Need(t)
	s := &Stack{t: t, RedisURL: opts.RedisURL}
	if s.RedisURL == "" {
		s.Redis = testsvc.OwnRedis(t, testsvc.RedisOptions{Persist: opts.PersistRedis})
		s.RedisURL = s.Redis.URL
	}
	if opts.StoreDir != "" {
		s.StoreURL = "file://" + opts.StoreDir
	} else {
		s.S3 = testsvc.OwnS3(t, testsvc.S3Options{})
		s.Bucket = s.S3.Bucket(t)
		s.StoreURL = s.S3URL(s.Bucket.Endpoint)
		// Credentials travel in the environment, never in a command line.
		s.Env = []string{"AWS_ACCESS_KEY_ID=" + s.Bucket.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.Bucket.SecretKey}
	}
	s.Queue = queueName(t.Name())
	return s
}

// S3URL is the store URL of the stack's bucket reached at endpoint (its
// own, or a proxy's "http://host:port").
func (s *Stack) S3URL(endpoint string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&region=%s", s.Bucket.Bucket, endpoint, s.Bucket.Region)
}

// queueName derives a queue (target class) from a test's name.
func queueName(test string) string {
	q := "t-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(test))
	return q[:min(len(q), 60)]
}

// Result is what a command printed and its exit status.
type Result struct {
	Code           int
	Stdout, Stderr string
	// PeakRSS is the process's peak resident set size (VmHWM as it
	// exited), in bytes; 0 when it could not tell.
	PeakRSS int64
	// CPU is the processor time (user and system) the process and the
	// children it waited for used; Wall how long it ran.
	CPU, Wall time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
}

// Producer runs `producer ARGS --redis URL --store URL` as a process, as a
// user does, and returns what it printed.
func (s *Stack) Producer(args ...string) Result {
	s.t.Helper()
	return RunProducer(s.t, s.Env, append(args, "--redis", s.RedisURL, "--store", s.StoreURL)...)
}

// RunProducer runs `producer ARGS` as a process of the test binary (whose
// TestMain calls Main), with env added to its environment, and returns
// what it printed, its exit status and its peak RSS.
func RunProducer(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	return runProducer(t, env, false, args)
}

// RunProducerMerged is RunProducer with stderr written where stdout is,
// as `2>&1` does: Result.Stdout holds both, in the order written, and
// Result.Stderr is empty. What a script piping `2>&1 | jq` reads.
func RunProducerMerged(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	return runProducer(t, env, true, args)
}

func runProducer(t testing.TB, env []string, merged bool, args []string) Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	peakFile := filepath.Join(t.TempDir(), "peak-rss")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), producerEnv+"="+strings.Join(args, "\x1f"), peakRSSFileEnv+"="+peakFile)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if merged {
		cmd.Stderr = &out // one writer: exec shares it, as a shell's 2>&1 does
	}
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("producer %s: %v", strings.Join(args, " "), err)
	}
	return Result{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: errb.String(), PeakRSS: readPeakRSS(peakFile),
		CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), Wall: wall}
}

// SubmitOut is `producer submit -o json`'s output.
type SubmitOut struct {
	Submissions []jobs.Submission    `json:"submissions"`
	Runs        []runstate.RunStatus `json:"runs"`
}

// Submit submits a bundle to the stack's queue (benchmarks kept short) and
// returns the run id; it fails the test unless submit exits 0.
func (s *Stack) Submit(bundleDir string, extra ...string) (string, Result) {
	s.t.Helper()
	r := s.Producer(append([]string{"submit", bundleDir, "--target", s.Queue, "--allow-unserved", "-o", "json", "--bench-time", "30ms"}, extra...)...)
	if r.Code != 0 {
		s.t.Fatalf("submit: %v", r)
	}
	var so SubmitOut
	if err := json.Unmarshal([]byte(r.Stdout), &so); err != nil || len(so.Submissions) != 1 {
		s.t.Fatalf("submit output: %v (%v)", r, err)
	}
	return so.Submissions[0].Run, r
}

// Status runs `producer status RUN -o json`: the run as a user sees it.
func (s *Stack) Status(run string) (runstate.RunStatus, Result) {
	s.t.Helper()
	r := s.Producer("status", run, "-o", "json")
	var st runstate.RunStatus
	if r.Code == 0 {
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			s.t.Fatalf("status %s: %v (%v)", run, r, err)
		}
	}
	return st, r
}

// Client is the stack's Redis client for the test's own checks, opened
// once and closed when the test ends. go-redis reconnects by itself after a
// restart.
func (s *Stack) Client() redis.UniversalClient {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rdb == nil {
		url := s.RedisURL
		if s.Redis != nil {
			url = s.Redis.URL // not a proxy's a test may have put in RedisURL
		}
		rdb, err := runstate.ConnectRedis(context.Background(), url)
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { rdb.Close() })
		s.rdb = rdb
	}
	return s.rdb
}

// Runs is the run bookkeeping in the stack's Redis.
func (s *Stack) Runs() *runstate.Runs { return runstate.NewRuns(s.Client()) }

// Store opens the stack's store (directly, not through any proxy).
func (s *Stack) Store() artifacts.Store {
	s.t.Helper()
	var st artifacts.Store
	var err error
	if s.S3 != nil {
		st, err = artifacts.NewS3(s.Bucket)
	} else {
		st, err = artifacts.Open(context.Background(), s.StoreURL)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return st
}

// Poll calls f every interval until it says done, for at most limit; then
// it fails the test with what, f's last note and the limit. Errors are
// notes, not failures: a fault test polls through outages.
func Poll(t testing.TB, limit time.Duration, what string, f func() (done bool, note string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		done, note := f()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; last seen: %s", what, limit, note)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitFinal waits until Redis records the run as finalized, for at most
// limit, riding out Redis errors (a restart under the test).
func (s *Stack) WaitFinal(run string, limit time.Duration) runstate.RunStatus {
	s.t.Helper()
	var st runstate.RunStatus
	Poll(s.t, limit, "run "+run+" finalized", func() (bool, string) {
		var err error
		st, err = s.Runs().Get(context.Background(), run)
		if err != nil {
			return false, err.Error()
		}
		return st.Final(), fmt.Sprintf("%+v", st)
	})
	return st
}

// WaitAttempt waits until a graph's task is on (at least) its n-th
// attempt.
func (s *Stack) WaitAttempt(run, graph string, n int, limit time.Duration) {
	s.t.Helper()
	Poll(s.t, limit, fmt.Sprintf("graph %s of run %s on attempt %d", graph, run, n), func() (bool, string) {
		st, err := s.Runs().Get(context.Background(), run)
		if err != nil {
			return false, err.Error()
		}
		return st.Graphs[graph].Attempts >= n, fmt.Sprintf("%+v", st.Graphs[graph])
	})
}

// WaitDone waits until at least n graphs of the run are done.
func (s *Stack) WaitDone(run string, n int, limit time.Duration) runstate.RunStatus {
	s.t.Helper()
	var st runstate.RunStatus
	Poll(s.t, limit, fmt.Sprintf("%d graph(s) of run %s done", n, run), func() (bool, string) {
		var err error
		st, err = s.Runs().Get(context.Background(), run)
		if err != nil {
			return false, err.Error()
		}
		return st.Done >= n || st.Final(), fmt.Sprintf("%+v", st)
	})
	return st
}
