package testsvc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is a service process on a fixed loopback port. It can be killed,
// stopped, frozen and started again on the same port with the same data:
// the fault suite (internal/testkit/faults) restarts Redis and S3 under running
// workers, which keep the address they were given.
type server struct {
	t      testing.TB
	name   string
	port   int
	cmdFor func(port int) *exec.Cmd
	ready  func(ctx context.Context, port int) bool
	logDir string

	mu     sync.Mutex
	cur    *proc // the running process; nil once it has been stopped
	starts int
	logs   []string
}

// proc is one run of a server's command.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// startServer starts the command cmdFor makes for a free port and waits
// until ready says yes. A port taken between choosing and binding makes the
// server exit; that is retried with another port.
func startServer(t testing.TB, name string, cmdFor func(port int) *exec.Cmd, ready func(ctx context.Context, port int) bool) *server {
	t.Helper()
	logDir := t.TempDir()
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("%s: finding a free port: %v", name, err)
		}
		s := &server{t: t, name: name, port: port, cmdFor: cmdFor, ready: ready, logDir: logDir}
		if err := s.start(); err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() {
			s.stop()
			if t.Failed() {
				for _, l := range s.logs {
					t.Logf("%s log (%s), last lines:\n%s", name, l, tail(l))
				}
			}
		})
		return s
	}
	t.Fatalf("%v", lastErr)
	return nil
}

// start launches the command on the server's port and waits until it is
// ready. A server already running is left as it is.
func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return nil
	}
	s.starts++
	logPath := filepath.Join(s.logDir, fmt.Sprintf("%s-%d-%d.log", s.name, s.port, s.starts))
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	defer logFile.Close() // the child has its own descriptor
	s.logs = append(s.logs, logPath)
	cmd := s.cmdFor(s.port)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := StartProcess(cmd); err != nil {
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for !s.ready(ctx, s.port) || !listensOn(cmd.Process.Pid, s.port) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); its log:\n%s", s.name, p.err, tail(logPath))
		case <-ctx.Done():
			p.stop()
			return fmt.Errorf("%s did not answer on 127.0.0.1:%d within %s; its log:\n%s", s.name, s.port, readyTimeout, tail(logPath))
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.cur = p
	return nil
}

// listensOn reports whether process pid holds the listening socket of
// 127.0.0.1:port (Linux's /proc). Another process can take a free port
// between freePort and the server's bind; the server then exits, but
// until it has, the other process answers the readiness probe (in CI a
// redis-server of a parallel test did: a sentinel "ready" on a port it
// never bound). Elsewhere than Linux it says yes.
func listensOn(pid, port int) bool {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true
	}
	if v6, err := os.ReadFile("/proc/net/tcp6"); err == nil { // a server on [::]
		data = append(data, v6...)
	}
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// sl local_address rem_address st ... inode (field 9); 0A is LISTEN.
		if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[l] {
			return true
		}
	}
	return false
}

// restart starts the server again after a stop or kill, failing the test
// when it does not come back.
func (s *server) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("restarting %s: %v", s.name, err)
	}
}

// stop sends SIGTERM, then SIGKILL if the process has not exited in time.
func (s *server) stop() {
	s.mu.Lock()
	p := s.cur
	s.cur = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// kill ends the server at once, as a crash or an OOM kill would.
func (s *server) kill() {
	s.mu.Lock()
	p := s.cur
	s.cur = nil
	s.mu.Unlock()
	if p != nil {
		p.cmd.Process.Signal(syscall.SIGCONT) // a frozen process dies all the same; this keeps Wait simple
		p.cmd.Process.Kill()
		<-p.done
	}
}

// signal sends sig to the running process (SIGSTOP freezes it, SIGCONT
// thaws it).
func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	if p == nil {
		s.t.Fatalf("%s is not running: cannot send it %v", s.name, sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("%s: sending %v: %v", s.name, sig, err)
	}
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	// A frozen (SIGSTOPped) process would sit on SIGTERM until killed.
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// pid is the running process's id; 0 when it is not running.
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.cmd.Process.Pid
}
