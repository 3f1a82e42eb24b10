package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// lineHandler is the slog.Handler of a worker configured with writers only
// (WorkerConfig.Log and Warn, no Logger): the lines it has always written,
// "15:04:05 message", with a record's attributes after the message as
// key=value. Debug records go to log (the step-by-step lines), the rest to
// warn (what an operator must see).
type lineHandler struct {
	mu        *sync.Mutex
	log, warn io.Writer
	attrs     []slog.Attr
	prefix    string // the open groups, "a.b."
}

func newLineHandler(log, warn io.Writer) *lineHandler {
	return &lineHandler{mu: &sync.Mutex{}, log: log, warn: warn}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.writer(l) != io.Discard
}

func (h *lineHandler) writer(l slog.Level) io.Writer {
	if l < slog.LevelInfo {
		return h.log
	}
	return h.warn
}

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(r.Time.Format("15:04:05"))
	b.WriteByte(' ')
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s%s=%v", h.prefix, a.Key, a.Value)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.writer(r.Level).Write(b.Bytes())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		c.attrs = append(c.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// clockPrefix is the "15:04:05 " that the reconciler's and the tuner's
// lines start with; the logger stamps its own time.
var clockPrefix = regexp.MustCompile(`^\d\d:\d\d:\d\d `)

// LogWriter is an io.Writer whose every line becomes one record of logger
// at level: for the parts of a worker that write lines (the tuner's
// progress, the reconciler's repairs, asynq's warnings). A leading clock
// time is dropped, since the record has its own.
func LogWriter(logger *slog.Logger, level slog.Level) io.Writer {
	return &logWriter{logger: logger, level: level}
}

type logWriter struct {
	logger *slog.Logger
	level  slog.Level
	mu     sync.Mutex
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := clockPrefix.ReplaceAllString(string(w.buf[:i]), "")
		w.buf = w.buf[i+1:]
		if line != "" {
			w.logger.Log(context.Background(), w.level, line)
		}
	}
}

// logf logs a step-by-step line (slog's debug level: `worker run -v`).
func (w *Worker) logf(format string, args ...any) {
	w.cfg.Logger.Debug(fmt.Sprintf(format, args...))
}

// warnf logs what an operator must see whatever the verbosity.
func (w *Worker) warnf(format string, args ...any) {
	w.cfg.Logger.Warn(fmt.Sprintf(format, args...))
}

// stepLog is where the tuner's progress lines go: the debug level, when
// it is on.
func (w *Worker) stepLog(ctx context.Context) io.Writer {
	if !w.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	return LogWriter(w.cfg.Logger, slog.LevelDebug)
}

// logTaskEnd writes a task's end line: what became of it, its winner or
// failure class, and how long it took.
func (w *Worker) logTaskEnd(q string, a *attempt, oc Outcome, class string, err error, d time.Duration) {
	attrs := []any{"run", a.p.Run, "graph", a.p.Graph, "queue", q}
	if a.n > 0 {
		attrs = append(attrs, "attempt", a.n)
	}
	attrs = append(attrs, "outcome", string(oc))
	if a.res != nil && a.res.Winner != nil {
		attrs = append(attrs, "winner", a.res.Winner.Candidate)
	}
	if class != "" {
		attrs = append(attrs, "failure_class", class)
	}
	if err != nil && oc == OutcomeFailed {
		attrs = append(attrs, "error", firstLine(err.Error()))
	}
	attrs = append(attrs, "duration", d.Round(time.Millisecond).String())
	level := slog.LevelInfo
	if a.n == 0 {
		// No attempt started (handed back to another platform or to busy
		// slots, every few seconds, or a duplicate): not worth a line
		// unless asked for.
		level = slog.LevelDebug
	}
	w.cfg.Logger.Log(context.Background(), level, "task finished", attrs...)
}

// quietLogger passes asynq's warnings and errors to the worker's
// step-by-step log (debug level), as it always has: asynq warns of things
// the worker handles itself (an expired lease, a retried task).
type quietLogger struct{ l *slog.Logger }

func (l quietLogger) Debug(args ...any) {}
func (l quietLogger) Info(args ...any)  {}
func (l quietLogger) Warn(args ...any)  { l.say("asynq warning:", args) }
func (l quietLogger) Error(args ...any) { l.say("asynq error:", args) }
func (l quietLogger) Fatal(args ...any) { l.say("asynq fatal:", args) }

func (l quietLogger) say(what string, args []any) {
	l.l.Debug(strings.TrimSuffix(fmt.Sprintln(append([]any{what}, args...)...), "\n"))
}
