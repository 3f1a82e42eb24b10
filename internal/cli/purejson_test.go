package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/runstate"
)

// -o json is JSON and nothing else, even with stderr merged into it: a
// submit that waits for its run prints its progress lines only on a
// terminal (here stderr is a buffer), and with -q never; the human form
// keeps them unless -q.
func TestSubmitWaitJSONIsOnlyJSON(t *testing.T) {
	t.Parallel()
	b := mlpBundle(t)
	store := "file://" + filepath.Join(t.TempDir(), "store")
	for _, tc := range []struct {
		name      string
		args      []string
		progress  bool // the "graph 0: done" lines on stderr
		jsonStdin bool
	}{
		{name: "json", args: []string{"-o", "json", "--wait"}, jsonStdin: true},
		{name: "json quiet", args: []string{"-o", "json", "--wait", "-q"}, jsonStdin: true},
		{name: "text", args: []string{"--wait"}, progress: true},
		{name: "text quiet", args: []string{"--wait", "-q"}},
	} {
		o := producer(t, append([]string{"submit", b, "--store", store, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
			"--bench-time", benchTime, "--force"}, tc.args...)...)
		o.wantCode(t, cli.ExitOK)
		if got := strings.Contains(o.stderr, "graph 0: "); got != tc.progress {
			t.Errorf("%s: progress lines on stderr %v, want %v:\n%s", tc.name, got, tc.progress, o)
		}
		if tc.jsonStdin {
			merged := o.stdout + o.stderr // what `2>&1 | jq` reads
			var v map[string]any
			if err := json.Unmarshal([]byte(merged), &v); err != nil || o.stderr != "" {
				t.Errorf("%s: stdout and stderr together are not one JSON document (%v):\n%s", tc.name, err, o)
			}
		}
	}
}

// status --watch -o jsonl is a stream of JSON lines, one per change of the
// run, its last the run as it ended; with -o json the one document; both
// with nothing on stderr off a terminal.
func TestStatusWatchJSONLines(t *testing.T) {
	url, runs := testRuns(t)
	ctx := context.Background()
	for _, format := range []string{"jsonl", "json"} {
		run := fmt.Sprintf("jsonl-%s-%d", format, time.Now().UnixNano())
		if _, err := runs.Create(ctx, run, "tests.JSONL", "cpu", []string{"0", "1"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan outcome)
		stdout := &lineWriter{lines: make(chan struct{}, 16)}
		go func() {
			var stderr strings.Builder
			args := []string{"status", run, "--redis", url, "--watch", "-o", format}
			code := cli.Execute(cli.NewProducer(), args, stdout, &stderr)
			done <- outcome{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
		}()
		for _, g := range []string{"0", "1"} {
			if format == "jsonl" {
				<-stdout.lines // the run as it was is out: change it
			} else {
				time.Sleep(1200 * time.Millisecond)
			}
			if _, _, err := runs.CompleteGraph(ctx, run, g, runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
				t.Fatal(err)
			}
		}
		if format == "jsonl" {
			<-stdout.lines
		}
		if _, err := runs.Finish(ctx, run, runstate.RunDone, "", ""); err != nil {
			t.Fatal(err)
		}
		o := <-done
		o.wantCode(t, cli.ExitOK)
		if o.stderr != "" {
			t.Errorf("%s: stderr is not empty:\n%s", format, o)
		}
		if format == "json" {
			var v map[string]any
			if err := json.Unmarshal([]byte(o.stdout), &v); err != nil || v["status"] != "done" {
				t.Errorf("-o json: not one document of the ended run (%v):\n%s", err, o.stdout)
			}
			continue
		}
		lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
		var last map[string]any
		for i, l := range lines {
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				t.Fatalf("-o jsonl: line %d is not JSON (%v): %q", i+1, err, l)
			}
		}
		if len(lines) != 4 || last["status"] != "done" {
			t.Errorf("-o jsonl: %d line(s), the last with status %v: want one per change (4: as it began, each graph done, ended), ending done:\n%s", len(lines), last["status"], o.stdout)
		}
	}
	producer(t, "status", "--redis", url, "-o", "jsonl").wantError(t, "producer", cli.ExitUsage, "-o jsonl streams one run")
}

// lineWriter collects what a command writes and signals each write (a
// watch writes a whole line at once).
type lineWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	lines chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.lines <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
