package ort

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/childenv"
)

// engine is the parent's handle on a session child.
type engine struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	bw        *bufio.Writer
	enc       *gob.Encoder
	dec       *gob.Decoder
	stderr    *tailBuffer
	artifacts []backend.Artifact
	info      map[string]string
	logPath   string
	// logFile receives the child's stderr through a copying goroutine of
	// exec's; it is closed only once the child has been waited for.
	logFile *os.File

	mu     sync.Mutex // one request at a time
	closed bool
	dead   error // set once the child has died or been killed
}

// startChild starts the session child process with the minimal
// environment plus env.
func startChild(command []string, logPath string, env []string) (*engine, error) {
	cmd := exec.Command(command[0], command[1:]...)
	// A minimal environment: the worker's S3 keys and Redis password stay
	// out of a process that reads models from outside.
	cmd.Env = childenv.Environ(env...)
	// Its own process group, so a kill takes any helper processes too, and
	// a parent death signal, so an orphaned child does not linger.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	e := &engine{cmd: cmd, stderr: newTailBuffer(64 << 10), logPath: logPath}
	var logFile *os.File
	if logPath != "" {
		// O_APPEND: the parent's own lines (Build) and the correctness
		// check's (the tuner) are appended beside the child's stderr
		// without overwriting each other.
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		logFile = f
		cmd.Stderr = io.MultiWriter(e.stderr, f)
	} else {
		cmd.Stderr = e.stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, err
	}
	e.logFile = logFile
	e.stdin = stdin
	e.bw = bufio.NewWriter(stdin)
	e.enc = gob.NewEncoder(e.bw)
	e.dec = gob.NewDecoder(bufio.NewReader(stdout))
	return e, nil
}

// call sends one request and waits for its response. If ctx ends first the
// child is killed (it may be stuck inside ONNX Runtime); if the child dies,
// the error says how, with the end of what it wrote to stderr.
func (e *engine) call(ctx context.Context, req request, failClass backend.FailureClass) (response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead != nil {
		return response{}, e.dead
	}
	if e.closed {
		return response{}, backend.Failf(backend.FailInfrastructure, string(req.Op), "engine is closed")
	}
	type result struct {
		resp response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		if err := e.enc.Encode(&req); err != nil {
			done <- result{err: err}
			return
		}
		if err := e.bw.Flush(); err != nil {
			done <- result{err: err}
			return
		}
		var resp response
		err := e.dec.Decode(&resp)
		for err == nil && resp.Partial {
			if p := backend.CallProgressFrom(ctx); p != nil {
				p(resp.Calls)
			}
			resp = response{}
			err = e.dec.Decode(&resp)
		}
		done <- result{resp: resp, err: err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			e.dead = e.childDied(string(req.Op), failClass)
			return response{}, e.dead
		}
		if r.resp.Err != "" {
			return r.resp, backend.Fail(r.resp.ErrClass, string(req.Op), errors.New(r.resp.Err))
		}
		return r.resp, nil
	case <-ctx.Done():
		e.kill()
		<-done
		e.wait() // reap it: no zombie, no leaked pipes
		class := backend.FailInfrastructure
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			class = backend.FailTimeout
		}
		e.dead = backend.Fail(class, string(req.Op), fmt.Errorf("ONNX Runtime session stopped: %w", ctx.Err()))
		return response{}, e.dead
	}
}

// childDied waits for the child and describes its death. The child may
// not be dead: a reply that did not decode (stray bytes on its stdout, a
// child of another version) leaves it waiting for the next request. Its
// stdin is closed so that it exits, and it is killed if it does not.
func (e *engine) childDied(op string, class backend.FailureClass) error {
	e.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- e.wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(closeTimeout):
		e.kill()
		err = <-done
	}
	how := "exited"
	if err != nil {
		how = err.Error() // e.g. "signal: segmentation fault"
	}
	tail := strings.TrimSpace(e.stderr.String())
	if tail != "" {
		tail = "; it printed: " + crashSummary(tail)
	}
	return backend.Failf(class, op, "ONNX Runtime session process died (%s)%s", how, tail)
}

// logf adds one of tunefleet's own lines to the build log.
func (e *engine) logf(format string, args ...any) {
	if e.logFile != nil {
		fmt.Fprintf(e.logFile, "tunefleet: "+format+"\n", args...)
	}
}

// wait reaps the child, then closes its log file: exec copies the child's
// stderr into it until the child is gone.
func (e *engine) wait() error {
	err := e.cmd.Wait()
	if e.logFile != nil {
		e.logFile.Close()
		e.logFile = nil
	}
	return err
}

func (e *engine) kill() {
	if e.cmd.Process != nil {
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (e *engine) Run(ctx context.Context, inputs []bundle.Tensor, outs []backend.OutputSpec) ([]bundle.Tensor, error) {
	resp, err := e.call(ctx, request{Op: opRun, Inputs: inputs, Outs: outs, OutRank0: encodeOuts(outs)}, backend.FailRuntime)
	if err != nil {
		return nil, err
	}
	return resp.Outputs, nil
}

func (e *engine) Benchmark(ctx context.Context, bs int, inputs []bundle.Tensor, outs []backend.OutputSpec, rule backend.StopRule) (backend.Stats, error) {
	req := request{Op: opBench, Inputs: inputs, Outs: outs, OutRank0: encodeOuts(outs), BatchSize: bs, Rule: rule,
		Progress: backend.CallProgressFrom(ctx) != nil}
	resp, err := e.call(ctx, req, backend.FailRuntime)
	if err != nil {
		return backend.Stats{}, err
	}
	return resp.Stats, nil
}

func (e *engine) Artifacts() []backend.Artifact { return e.artifacts }

func (e *engine) Info() map[string]string { return e.info }

// Close asks the child to exit and waits for it; a child that does not
// answer is killed.
func (e *engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.dead == nil {
		if e.enc.Encode(&request{Op: opClose}) != nil || e.bw.Flush() != nil {
			e.kill()
		}
		e.stdin.Close()
		// A child stuck in ONNX Runtime's teardown must not hold the task
		// (and its slot) forever.
		waited := make(chan struct{})
		go func() { e.wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(closeTimeout):
			e.kill()
			<-waited
		}
	}
	return nil
}

// closeTimeout is how long Close waits for a child to exit by itself.
const closeTimeout = 10 * time.Second

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append([]byte{}, t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// crashSummary picks the informative part of a dying child's stderr: the
// first lines of a Go panic or fatal signal report, or of a C++ abort,
// rather than the end of a stack dump.
func crashSummary(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, p := range []string{"panic:", "fatal error:", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "terminate called", "Aborted"} {
			if strings.HasPrefix(strings.TrimSpace(l), p) {
				end := min(i+3, len(lines))
				return strings.Join(lines[i:end], " | ")
			}
		}
	}
	return lastLines(s, 8)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// RunKey is what, beside the engine file, decides how the engine runs:
// two candidates whose optimized models are byte-identical and whose
// RunKeys are equal are the same engine (backend.RunKeyer).
func (e *engine) RunKey() string {
	return fmt.Sprintf("intra_op=%s inter_op=%s spinning=%s", e.info["intra_op"], e.info["inter_op"], e.info["spinning"])
}
