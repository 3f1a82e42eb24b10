package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// Oversized input is not echoed back: a 10,000-character path (which os's
// errors repeat whole) gives a message of a
// few hundred characters that still says what is wrong and starts with
// the input (issue 18).
func TestOversizedInputIsCutInMessages(t *testing.T) {
	t.Parallel()
	long := "/" + filepath.Join(strings.Repeat(strings.Repeat("d", 200)+"/", 50), "bundle")
	tests := []struct {
		name string
		run  func() outcome
		want string
	}{
		{"bundle validate, long path", func() outcome { return producer(t, "bundle", "validate", long) }, "file name too long"},
		{"submit, long path", func() outcome { return producer(t, "submit", long) }, "file name too long"},
		{"worker tune, long path", func() outcome { return worker(t, "tune", long, "--out", filepath.Join(t.TempDir(), "o")) }, "file name too long"},
		{"worker trt-log, long path", func() outcome { return worker(t, "trt-log", long) }, "file name too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.run()
			if o.code == 0 {
				t.Fatalf("want a failure, got %s", o)
			}
			if len(o.stderr) > 1000 || !strings.Contains(o.stderr, tt.want) {
				t.Errorf("stderr is %d bytes, want at most 1000 saying %q: %.600s", len(o.stderr), tt.want, o.stderr)
			}
		})
	}
}
