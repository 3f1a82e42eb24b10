package stack

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// WorkerOptions configures a worker process.
type WorkerOptions struct {
	// Redis and Store override the stack's URLs (e.g. a fault proxy's).
	Redis, Store string
	// TRT is a trtexec stand-in config (trtreplay) for the worker's
	// trtexec children; set it with Args "--trtexec", trtreplay.Executable.
	TRT string
	// Env is added to the worker's environment.
	Env []string
	// Args are added to `worker run`'s.
	Args []string
}

// Worker is a `worker run` process serving the stack's queue.
type Worker struct {
	Cmd  *exec.Cmd
	log  *testsvc.SyncBuffer
	done chan struct{}
}

// StartWorker starts a worker process (one slot, verbose log) and kills it,
// with its process group, when the test ends; its log is printed when the
// test failed.
func (s *Stack) StartWorker(o WorkerOptions) *Worker {
	s.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		s.t.Fatal(err)
	}
	redisURL, storeURL := s.RedisURL, s.StoreURL
	if o.Redis != "" {
		redisURL = o.Redis
	}
	if o.Store != "" {
		storeURL = o.Store
	}
	args := append([]string{"run", "--redis", redisURL, "--store", storeURL, "--queues", s.Queue, "--concurrency", "1", "-v"}, o.Args...)
	env := append(append(os.Environ(), s.Env...), o.Env...)
	if o.TRT != "" {
		env = append(env, WorkerTRTEnv+"="+o.TRT)
	}
	return s.startChild(exe, append(env, WorkerEnv+"="+strings.Join(args, "\x1f")), "worker")
}

// StartWorkerProcess starts `worker run ARGS` as a process of this test
// binary (whose TestMain calls Main), with env added to its environment,
// for a test or benchmark with services of its own (no Stack); it is
// killed when t ends. Stop ends it as a fleet's would be ended.
func StartWorkerProcess(t testing.TB, env []string, args ...string) *Worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startChild(t, exe, append(append(os.Environ(), env...), WorkerEnv+"="+strings.Join(append([]string{"run"}, args...), "\x1f")), "worker")
}

// Stop sends the worker SIGTERM (it hands back its tasks, unregisters
// its slots and exits) and waits up to limit for it to exit; false when
// it did not.
func (w *Worker) Stop(limit time.Duration) bool {
	if !w.Exited() {
		w.Cmd.Process.Signal(syscall.SIGTERM)
	}
	return w.Wait(limit)
}

func (s *Stack) startChild(exe string, env []string, what string) *Worker {
	return startChild(s.t, exe, env, what)
}

// startChild starts this test binary as a child in the role its env
// names, in its own process group (a kill takes its trtexec and session
// children too), killed when the test ends; its log is printed when the
// test failed.
func startChild(t testing.TB, exe string, env []string, what string) *Worker {
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &Worker{Cmd: cmd, log: &testsvc.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.log, w.log
	if err := testsvc.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.Kill()
		if t.Failed() {
			t.Logf("%s (pid %d) log:\n%s", what, cmd.Process.Pid, w.Log())
		}
	})
	return w
}

// StartProducer starts a long-lived producer command (`producer serve`,
// `producer nightly --schedule`) as a process on the stack's Redis and
// store, killed when the test ends; its log is printed when the test
// failed.
func (s *Stack) StartProducer(args ...string) *Worker {
	s.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		s.t.Fatal(err)
	}
	args = append(args, "--redis", s.RedisURL, "--store", s.StoreURL)
	env := append(append(os.Environ(), s.Env...), producerEnv+"="+strings.Join(args, "\x1f"))
	return s.startChild(exe, env, "producer "+args[0])
}

// StartProducerProcess starts a long-lived `producer ARGS` (`producer
// serve`) as a process of this test binary (whose TestMain calls Main),
// with env added to its environment, for a test or benchmark with
// services of its own (no Stack); it is killed when t ends.
func StartProducerProcess(t testing.TB, env []string, args ...string) *Worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startChild(t, exe, append(append(os.Environ(), env...), producerEnv+"="+strings.Join(args, "\x1f")), "producer "+args[0])
}

// Kill ends the worker and its process group with SIGKILL, without
// warning, and waits for it.
func (w *Worker) Kill() {
	if !w.Exited() {
		syscall.Kill(-w.Cmd.Process.Pid, syscall.SIGKILL)
	}
	<-w.done
}

// Exited reports whether the worker process has ended.
func (w *Worker) Exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// Wait waits up to limit for the worker to exit; false when it did not.
func (w *Worker) Wait(limit time.Duration) bool {
	select {
	case <-w.done:
		return true
	case <-time.After(limit):
		return false
	}
}

// Log is what the worker printed so far (stdout and stderr).
func (w *Worker) Log() string { return w.log.String() }
