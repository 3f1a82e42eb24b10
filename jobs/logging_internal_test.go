package jobs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"testing"
)

// A worker configured with writers only writes the lines it always has
// ("15:04:05 message", attributes after it): debug records to Log, the
// rest to Warn. LogWriter turns written lines into records, whole lines
// only, without their own clock time.
func TestLineHandlerAndLogWriter(t *testing.T) {
	t.Parallel()
	var log, warn bytes.Buffer
	l := slog.New(newLineHandler(&log, &warn))
	l.Debug("a step")
	l.Warn("run r graph 0 attempt 1 failed (build), will retry: boom")
	l.With("run", "r").Info("task finished", "outcome", "succeeded")
	clock := `^\d\d:\d\d:\d\d `
	if !regexp.MustCompile(clock + `a step\n$`).MatchString(log.String()) {
		t.Errorf("debug writer has %q", log.String())
	}
	if !regexp.MustCompile(clock + `run r graph 0 attempt 1 failed \(build\), will retry: boom\n\d\d:\d\d:\d\d task finished run=r outcome=succeeded\n$`).MatchString(warn.String()) {
		t.Errorf("warn writer has %q", warn.String())
	}
	if slog.New(newLineHandler(io.Discard, &warn)).Enabled(context.Background(), slog.LevelDebug) {
		t.Error("debug records are formatted for a discarded Log")
	}

	var out bytes.Buffer
	w := LogWriter(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: dropTime})), slog.LevelWarn)
	w.Write([]byte("12:00:01 reconcile: run x re-enqueued\nhalf a "))
	w.Write([]byte("line\n\n"))
	want := "level=WARN msg=\"reconcile: run x re-enqueued\"\nlevel=WARN msg=\"half a line\"\n"
	if out.String() != want {
		t.Errorf("LogWriter wrote %q, want %q", out.String(), want)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
