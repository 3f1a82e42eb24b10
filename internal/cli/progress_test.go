package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// Off a terminal, a transfer worth a bar prints a plain line at each
// quarter and one at the end; one too small for a bar prints nothing.
func TestTransferLinesOffATerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		sizes []int64 // Expect calls, each moved in 10 steps
		want  []string
	}{
		{"small", []int64{1 << 20}, nil},
		{"large", []int64{64 << 20}, []string{
			"upload b: 0% (0.0 MiB of 64.0 MiB)",
			"upload b: 25% (19.2 MiB of 64.0 MiB)",
			"upload b: 50% (38.4 MiB of 64.0 MiB)",
			"upload b: 75% (51.2 MiB of 64.0 MiB)",
			"upload b: done, 64.0 MiB",
		}},
		{"grows past the threshold", []int64{10 << 20, 30 << 20}, []string{
			"upload b: 25% (10.0 MiB of 40.0 MiB)",
			"upload b: 50% (22.0 MiB of 40.0 MiB)",
			"upload b: 75% (31.0 MiB of 40.0 MiB)",
			"upload b: done, 40.0 MiB",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer // not a terminal
			bar := &transferBar{w: &out, what: "upload b", lines: true}
			for _, n := range tt.sizes {
				bar.Expect(n)
				for range 10 {
					bar.Moved(n / 10)
				}
			}
			bar.finish()
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				got = nil
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A real upload to versitygw through withTransferBar's context (what
// submit does), to a writer that is not a terminal: the lines come in
// order, each step once, and end with the whole size.
func TestTransferLinesOfARealUpload(t *testing.T) {
	store, err := artifacts.NewS3(testsvc.S3(t))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 40<<20)
	path := filepath.Join(t.TempDir(), "engine.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	ref := artifacts.Ref{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	var out bytes.Buffer
	ctx, done := withTransferBar(progressCmd(t, &out, "--progress"), "upload b")
	if err := artifacts.PutFiles(ctx, store, []artifacts.FileBlob{{Path: path, Ref: ref}}, 1); err != nil {
		t.Fatal(err)
	}
	done()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "upload b: done, 40.0 MiB" {
		t.Fatalf("printed:\n%s", out.String())
	}
	last := -1
	for _, l := range lines[:len(lines)-1] {
		var pct int
		if _, err := fmt.Sscanf(l, "upload b: %d%%", &pct); err != nil || pct <= last || pct%lineStep != 0 || !strings.HasSuffix(l, "of 40.0 MiB)") {
			t.Errorf("line %q after step %d", l, last)
		}
		last = pct
	}
}

// progressCmd is a command with the roots' progress flags, parsed from
// args, writing its stderr to w.
func progressCmd(t *testing.T, w *bytes.Buffer, args ...string) *cobra.Command {
	t.Helper()
	cmd := &cobra.Command{Use: "x"}
	(&progressFlags{}).register(cmd)
	cmd.SetErr(w)
	cmd.SetContext(context.Background())
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// Off a terminal, progress shows only when --progress asks for it, and
// -q wins over it: a script merging stderr into -o json reads only JSON.
func TestProgressOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want progressMode
	}{
		{nil, progressNone},
		{[]string{"--progress"}, progressLines},
		{[]string{"--progress", "-q"}, progressNone},
		{[]string{"-q"}, progressNone},
	} {
		var out bytes.Buffer
		cmd := progressCmd(t, &out, tc.args...)
		if got := progressOn(cmd, &out); got != tc.want {
			t.Errorf("%q: progress mode %d, want %d", tc.args, got, tc.want)
		}
		ctx, done := withTransferBar(cmd, "upload b")
		if shown := ctx != cmd.Context(); shown != (tc.want != progressNone) {
			t.Errorf("%q: transfer progress shown=%v, want %v", tc.args, shown, tc.want != progressNone)
		}
		done()
	}
}
