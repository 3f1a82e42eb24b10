package aitune_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// python returns the python3 the tests use to read what Go wrote; without
// one they are skipped, except in CI, where python3 is part of the
// contract (the checkpoint's consumer is Python).
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not found; CI must have it (the AITune checkpoint tests read what Go wrote with it)")
		}
		t.Skip("python3 not found")
	}
	return p
}

// runPython runs python3 with args (no shell), feeding stdin, and returns
// its stdout.
func runPython(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// sameJSON compares a JSON document with an expected Go value (marshalled
// the same way) and reports the first differing line of their indented
// forms.
func sameJSON(t *testing.T, what string, got []byte, want any) {
	t.Helper()
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal(wb, &w); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(g, w) {
		return
	}
	gi, _ := json.MarshalIndent(g, "", "  ")
	wi, _ := json.MarshalIndent(w, "", "  ")
	gl, wl := strings.Split(string(gi), "\n"), strings.Split(string(wi), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var a, b string
		if i < len(gl) {
			a = gl[i]
		}
		if i < len(wl) {
			b = wl[i]
		}
		if a != b {
			lo := max(0, i-8)
			t.Fatalf("%s differs at line %d:\n  got  %q\n  want %q\ncontext (got):\n%s", what, i+1, a, b, strings.Join(gl[lo:min(len(gl), i+3)], "\n"))
		}
	}
}
