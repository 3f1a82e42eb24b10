package trt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tunefleet/tunefleet/internal/childenv"
)

// DefaultExecutable is looked up on PATH when no executable is configured.
const DefaultExecutable = "trtexec"

// Invocation is one trtexec run.
type Invocation struct {
	Exe  string   // path or name on PATH; empty means DefaultExecutable
	Args []string // argv after the executable, e.g. from BuildArgs
	Dir  string   // working directory; relative paths in Args are relative to it
	Env  []string // added to the minimal environment a child gets (childenv), e.g. CUDA_VISIBLE_DEVICES=GPU-…
	// LogPath receives stdout and stderr, in the order trtexec wrote them.
	LogPath string
	// Timeout bounds the run; 0 means only ctx does.
	Timeout time.Duration
}

// ExitStatus is how a trtexec process ended.
type ExitStatus struct {
	// Code is the exit code; -1 when a signal ended the process or the
	// status is unknown.
	Code int `json:"code"`
	// Signal ended the process (SIGABRT from 8.6's abort(), SIGSEGV, or
	// SIGKILL from the kernel's OOM killer or from us).
	Signal syscall.Signal `json:"signal,omitempty"`
	// TimedOut: we killed it because its time was up.
	TimedOut bool `json:"timed_out,omitempty"`
	// Cancelled: we killed it because the caller gave up.
	Cancelled bool `json:"cancelled,omitempty"`
	// Unknown: nothing is known but the log (e.g. `worker trt-log FILE`).
	Unknown bool `json:"unknown,omitempty"`
}

func (s ExitStatus) String() string {
	switch {
	case s.TimedOut:
		return "killed after its time limit"
	case s.Cancelled:
		return "killed: cancelled"
	case s.Unknown:
		return "exit status unknown"
	case s.Signal != 0:
		return "killed by signal " + s.Signal.String()
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// Success reports a clean exit 0.
func (s ExitStatus) Success() bool {
	return s.Code == 0 && s.Signal == 0 && !s.TimedOut && !s.Cancelled && !s.Unknown
}

// Outcome is the result of Run.
type Outcome struct {
	Exit     ExitStatus
	LogPath  string
	Duration time.Duration
}

// Run runs trtexec in its own process group with stdout and stderr going to
// one log file (one file description for both, so their lines keep trtexec's
// order: [I] lines go to stdout, [W]/[E] lines to stderr). When the timeout
// passes or ctx ends it kills the whole group, since trtexec may have helper
// processes (11.x's tuner forks trtexec children). The error is for a run
// that could not start; how trtexec ended is in the Outcome.
func Run(ctx context.Context, inv Invocation) (Outcome, error) {
	exe := inv.Exe
	if exe == "" {
		exe = DefaultExecutable
	}
	path, err := exec.LookPath(exe)
	if err != nil {
		return Outcome{}, fmt.Errorf("trtexec executable %q not found: %w", exe, err)
	}
	// trtexec runs in the candidate's work directory: a relative path
	// (--trtexec ./bin/trtexec) must not be resolved from there.
	if path, err = filepath.Abs(path); err != nil {
		return Outcome{}, fmt.Errorf("trtexec executable %q: %w", exe, err)
	}
	if inv.LogPath == "" {
		return Outcome{}, errors.New("trtexec run: no log file")
	}
	logf, err := os.OpenFile(inv.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return Outcome{}, fmt.Errorf("trtexec log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(path, inv.Args...)
	cmd.Dir = inv.Dir
	// A minimal environment plus what the task sets: the worker's S3 keys
	// and Redis password stay out of trtexec and the plugins it loads.
	cmd.Env = childenv.Environ(inv.Env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Outcome{}, fmt.Errorf("start %s: %w", path, err)
	}
	done := make(chan error, 1)
	// How it ended is read from ProcessState; Wait's error adds nothing.
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if inv.Timeout > 0 {
		t := time.NewTimer(inv.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var st ExitStatus
	stop := func() bool {
		// A process that has just exited on its own is not killed: once
		// Wait has reaped it its pid, and so the group id, may be reused.
		select {
		case <-done:
			return false
		default:
			killGroup(cmd.Process.Pid)
			<-done
			return true
		}
	}
	select {
	case <-done:
	case <-timeout:
		st.TimedOut = stop()
	case <-ctx.Done():
		if stop() {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				st.TimedOut = true
			} else {
				st.Cancelled = true
			}
		}
	}
	es := exitStatusOf(cmd.ProcessState)
	es.TimedOut, es.Cancelled = st.TimedOut, st.Cancelled
	return Outcome{Exit: es, LogPath: inv.LogPath, Duration: time.Since(start)}, nil
}

// exitStatusOf reads the exit code or the signal of a finished process.
func exitStatusOf(ps *os.ProcessState) ExitStatus {
	if ps == nil {
		return ExitStatus{Code: -1, Unknown: true}
	}
	st := ExitStatus{Code: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Code = -1
		st.Signal = ws.Signal()
	}
	return st
}

// killGroup sends SIGKILL to the process group led by pid. trtexec does not
// handle SIGTERM in any useful way, and a half-written engine or timing
// cache is discarded anyway (they are only kept after a clean exit).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
