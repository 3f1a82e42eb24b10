package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

type fakePing struct{ err, wedged error }

func (f fakePing) Ping() error                { return f.err }
func (f fakePing) Wedged(time.Duration) error { return f.wedged }

// /readyz tells the truth: 503 with the reason when Redis is unreachable
// or the machine is broken (issue 8, item 5). /healthz is liveness: it
// fails only for a wedged task, never for Redis or a broken machine, which
// hands its tasks back and exits by itself (issue 34: a liveness probe on
// Redis killed every build over a Redis restart).
func TestHealthz(t *testing.T) {
	tests := []struct {
		name                 string
		redis, broken, stuck error
		path                 string
		code                 int
		body                 []string
	}{
		{"ready", nil, nil, nil, "/readyz", http.StatusOK, []string{"ok"}},
		{"alive", nil, nil, nil, "/healthz", http.StatusOK, []string{"ok"}},
		{"redis down: unready", errors.New("dial tcp: connection refused"), nil, nil, "/readyz", http.StatusServiceUnavailable, []string{"redis:", "connection refused"}},
		{"redis down: alive", errors.New("dial tcp: connection refused"), nil, nil, "/healthz", http.StatusOK, []string{"ok"}},
		{"broken machine: unready", nil, errors.New("trtexec sees no usable GPU"), nil, "/readyz", http.StatusServiceUnavailable, []string{"broken", "no usable GPU"}},
		{"broken machine: alive while it hands back", nil, errors.New("trtexec sees no usable GPU"), nil, "/healthz", http.StatusOK, []string{"ok"}},
		{"both", errors.New("refused"), errors.New("CUDA failure"), nil, "/readyz", http.StatusServiceUnavailable, []string{"broken", "CUDA failure"}},
		{"wedged task", nil, nil, errors.New("task r:g (tune:graph) is 3m0s past its deadline"), "/healthz", http.StatusServiceUnavailable, []string{"wedged", "r:g"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newWorkerHealth(fakePing{tt.redis, tt.stuck}, time.Minute)
			if tt.broken != nil {
				if !h.markBroken(tt.broken) {
					t.Fatal("first markBroken reported as not first")
				}
				if h.markBroken(errors.New("later")) {
					t.Fatal("second markBroken reported as first")
				}
			}
			rec := httptest.NewRecorder()
			h.handler().ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if rec.Code != tt.code {
				t.Errorf("%s: code %d, want %d (body %q)", tt.path, rec.Code, tt.code, rec.Body)
			}
			for _, w := range tt.body {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("%s: body %q does not say %q", tt.path, rec.Body, w)
				}
			}
		})
	}
}

type fakeWorker struct{ shutdowns int }

func (f *fakeWorker) Shutdown() { f.shutdowns++ }

// A broken machine ends `worker run` with exit status 3 after the worker
// shut down (running tasks handed back); a signal ends it with 0.
func TestServeUntil(t *testing.T) {
	tests := []struct {
		name  string
		event func(sig chan os.Signal, h *workerHealth, cancel context.CancelFunc)
		code  int
	}{
		{"SIGTERM", func(sig chan os.Signal, _ *workerHealth, _ context.CancelFunc) { sig <- os.Interrupt }, ExitOK},
		{"context ends", func(_ chan os.Signal, _ *workerHealth, cancel context.CancelFunc) { cancel() }, ExitOK},
		{"broken machine", func(_ chan os.Signal, h *workerHealth, _ context.CancelFunc) {
			h.markBroken(errors.New("the GPU fell off the bus"))
		}, ExitInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sig := make(chan os.Signal, 1)
			h := newWorkerHealth(fakePing{}, time.Minute)
			w := &fakeWorker{}
			tt.event(sig, h, cancel)
			var stderr bytes.Buffer
			err := serveUntil(ctx, sig, h, w, newLogger(&stderr, logText, false))
			if w.shutdowns != 1 {
				t.Errorf("Shutdown called %d times, want 1", w.shutdowns)
			}
			code := ExitOK
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
			} else if err != nil {
				code = ExitInternal
			}
			if code != tt.code {
				t.Errorf("serveUntil = %v (exit %d), want exit %d", err, code, tt.code)
			}
			if tt.code == ExitInternal && !strings.Contains(err.Error(), "fell off the bus") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}
