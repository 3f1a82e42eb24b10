package trt_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/trt"
)

// TestRunReplaysBothStreams: the log file gets stdout and stderr in the
// order the process wrote them (the stand-in sends [W]/[E] lines to stderr, as
// trtexec does), so it is byte for byte the fixture.
func TestRunReplaysBothStreams(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		exit    int
	}{{fxTRT1016, 0}, {fxPluginFail, 1}} {
		env := trtreplay.WriteConfig(t, trtreplay.Config{Build: trtreplay.Replay{Log: fixture(t, tc.fixture), Exit: tc.exit}})
		dir := t.TempDir()
		out, err := trt.Run(context.Background(), trt.Invocation{Exe: trtreplay.Executable(t), Args: []string{"--onnx=m.onnx"}, Dir: dir, Env: []string{env}, LogPath: filepath.Join(dir, "x.log")})
		if err != nil {
			t.Fatal(err)
		}
		if out.Exit.Code != tc.exit || out.Exit.Signal != 0 || out.Exit.TimedOut || out.Exit.Success() != (tc.exit == 0) {
			t.Errorf("%s: exit %+v", tc.fixture, out.Exit)
		}
		got, _ := os.ReadFile(out.LogPath)
		if !bytes.Equal(got, readFixture(t, tc.fixture)) {
			t.Errorf("%s: the log differs from the replayed fixture", tc.fixture)
		}
	}
}

func TestRunSignal(t *testing.T) {
	env := trtreplay.WriteConfig(t, trtreplay.Config{Build: trtreplay.Replay{Log: fixture(t, fxTRT82Fail), Signal: int(syscall.SIGABRT)}})
	dir := t.TempDir()
	out, err := trt.Run(context.Background(), trt.Invocation{Exe: trtreplay.Executable(t), Args: []string{"--onnx=m.onnx"}, Dir: dir, Env: []string{env}, LogPath: filepath.Join(dir, "x.log")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Exit.Signal != syscall.SIGABRT || out.Exit.Code != -1 || out.Exit.Success() {
		t.Errorf("exit %+v, want SIGABRT", out.Exit)
	}
	if !strings.Contains(out.Exit.String(), "aborted") {
		t.Errorf("exit string %q", out.Exit)
	}
}

func TestRunNotFound(t *testing.T) {
	dir := t.TempDir()
	_, err := trt.Run(context.Background(), trt.Invocation{Exe: filepath.Join(dir, "trtexec"), LogPath: filepath.Join(dir, "x.log")})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Run = %v", err)
	}
}

// processGone reports whether pid has exited (gone, or a zombie nobody has
// reaped yet: a container's init may not reap).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) S …": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// TestRunKillsGroup: on timeout and on cancellation the whole process
// group goes, the helper trtexec started included.
func TestRunKillsGroup(t *testing.T) {
	for _, mode := range []string{"timeout", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "helper.pid")
			env := trtreplay.WriteConfig(t, trtreplay.Config{Build: trtreplay.Replay{Hang: true, HangPIDFile: pidFile}})
			inv := trt.Invocation{Exe: trtreplay.Executable(t), Args: []string{"--onnx=m.onnx"}, Dir: dir, Env: []string{env}, LogPath: filepath.Join(dir, "x.log")}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if mode == "timeout" {
				inv.Timeout = 2 * time.Second
			} else {
				go func() {
					for {
						if _, err := os.Stat(pidFile); err == nil {
							cancel()
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			start := time.Now()
			out, err := trt.Run(ctx, inv)
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) > 30*time.Second {
				t.Errorf("Run took %v", time.Since(start))
			}
			if mode == "timeout" && (!out.Exit.TimedOut || out.Exit.Cancelled) || mode == "cancel" && (!out.Exit.Cancelled || out.Exit.TimedOut) {
				t.Errorf("exit %+v", out.Exit)
			}
			if out.Exit.Signal != syscall.SIGKILL {
				t.Errorf("exit %+v, want SIGKILL", out.Exit)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the stand-in did not start its helper: %v", err)
			}
			pid, _ := strconv.Atoi(string(b))
			deadline := time.Now().Add(10 * time.Second)
			for !processGone(pid) {
				if time.Now().After(deadline) {
					syscall.Kill(pid, syscall.SIGKILL) // our own helper: do not leak it
					t.Fatalf("helper %d survived the group kill", pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
			c := trt.Classify(&trt.Log{}, out.Exit, trt.StageBuild)
			if mode == "timeout" && c.Kind != trt.KindTimeout || mode == "cancel" && c.Kind != trt.KindCancelled {
				t.Errorf("Classify = %+v", c)
			}
		})
	}
}

// A relative executable path is found from where the worker runs, not from
// the candidate's work directory that trtexec runs in.
func TestRunRelativeExecutable(t *testing.T) {
	exe := trtreplay.Executable(t)
	env := trtreplay.WriteConfig(t, trtreplay.Config{Build: trtreplay.Replay{Log: fixture(t, fxTRT1016)}}) // before the Chdir: fixtures are found relative to here
	t.Chdir(filepath.Dir(exe))
	rel := "." + string(filepath.Separator) + filepath.Base(exe)
	dir := t.TempDir()
	out, err := trt.Run(context.Background(), trt.Invocation{Exe: rel, Args: []string{"--onnx=m.onnx"}, Dir: dir, Env: []string{env}, LogPath: filepath.Join(dir, "x.log")})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Exit.Success() {
		t.Fatalf("exit %+v", out.Exit)
	}
}
