package childenv

import (
	"os"
	"strings"
)

// allowed are the variables a child keeps by exact name: where to find
// programs and libraries, its home and scratch space, its locale, and the
// Go runtime's settings (the ONNX Runtime child is this Go binary again;
// GORACE and GOCOVERDIR keep -race and coverage working in tests).
var allowed = map[string]bool{
	"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "LANGUAGE": true, "TZ": true,
	"LD_LIBRARY_PATH": true, "ONNXRUNTIME_SHARED_LIBRARY_PATH": true,
	"GORACE": true, "GOCOVERDIR": true, "GOTRACEBACK": true, "GODEBUG": true, "GOMAXPROCS": true,
}

// allowedPrefixes are kept by prefix: the locale's categories and what
// CUDA, the NVIDIA container runtime and TensorRT read
// (CUDA_VISIBLE_DEVICES pins a task to its GPU).
var allowedPrefixes = []string{"LC_", "CUDA_", "NVIDIA_", "TRT_"}

// testHooks are the switches of the test stand-ins that play a worker's
// children (internal/testkit/trtreplay's trtexec, internal/testkit/stack's crashing
// session child): settings, never secrets, set on a worker by the tests.
var testHooks = map[string]bool{
	"TUNEFLEET_TRTREPLAY_CONFIG":     true,
	"TUNEFLEET_TRTREPLAY_SLEEP":      true,
	"TUNEFLEET_STACK_CRASH_ORT_ONCE": true,
}

// ExtraEnv names the variable through which an operator passes more
// variables to the children: a comma-separated list of names (a proxy
// setting a plugin needs, say). It is read from the worker's environment.
const ExtraEnv = "TUNEFLEET_CHILD_ENV"

// Allowed reports whether a child keeps the variable name.
func Allowed(name string) bool {
	if allowed[name] || testHooks[name] {
		return true
	}
	for _, n := range strings.Split(os.Getenv(ExtraEnv), ",") {
		if n = strings.TrimSpace(n); n != "" && n == name {
			return true
		}
	}
	for _, p := range allowedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Minimal returns the variables of parent ("NAME=value" entries, as
// os.Environ gives them) that a child keeps, followed by extra, which the
// caller sets on purpose (the child protocol's marker, a task's GPU). A
// later entry wins, as exec does with duplicates.
func Minimal(parent []string, extra ...string) []string {
	out := make([]string, 0, len(extra)+16)
	for _, kv := range parent {
		name, _, ok := strings.Cut(kv, "=")
		if ok && Allowed(name) {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// Environ is Minimal of this process's environment.
func Environ(extra ...string) []string { return Minimal(os.Environ(), extra...) }
