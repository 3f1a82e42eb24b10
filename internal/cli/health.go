package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
)

type pinger interface{ Ping() error }

// workerHealth is what a worker's /healthz reports: 200 while it reaches
// Redis and its machine is not broken; 503 with the reason otherwise, so
// that an orchestrator stops sending it work and an operator sees why.
type workerHealth struct {
	redis pinger
	// metrics, if set, is served at /metrics beside /healthz.
	metrics http.Handler

	mu     sync.Mutex
	broken error
	ch     chan error // receives the first breakage, once
}

func newWorkerHealth(p pinger) *workerHealth {
	return &workerHealth{redis: p, ch: make(chan error, 1)}
}

// markBroken records that the machine cannot work anymore (driver gone,
// GPU fallen off the bus). It reports whether this was the first report:
// only the first is acted on.
func (h *workerHealth) markBroken(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return false
	}
	h.broken = err
	h.ch <- err
	return true
}

// Broken is the first breakage reported, or nil.
func (h *workerHealth) Broken() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.broken
}

// brokenCh delivers the first breakage.
func (h *workerHealth) brokenCh() <-chan error { return h.ch }

func (h *workerHealth) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Broken(); err != nil {
			http.Error(w, "broken: this machine cannot run tasks, it is handing them back and exiting: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := h.redis.Ping(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if h.metrics != nil {
		mux.Handle("/metrics", h.metrics)
	}
	return mux
}

// shutdowner is the part of jobs.Worker that ends it.
type shutdowner interface {
	Shutdown() // stop taking, wait up to the shutdown timeout, hand the rest back
}

// serveUntil blocks until a signal, the end of ctx, or a broken machine,
// then shuts the worker down. A broken machine makes it return an error
// with ExitInternal (3) once running tasks are handed back, so that a
// supervisor restarts or replaces it and an operator is told; a signal is
// a normal end.
func serveUntil(ctx context.Context, sig <-chan os.Signal, health *workerHealth, w shutdowner, logger *slog.Logger) error {
	select {
	case <-sig:
	case <-ctx.Done():
	case err := <-health.brokenCh():
		logger.Error("worker: broken machine: handing tasks back and exiting")
		w.Shutdown()
		return &exitError{ExitInternal, fmt.Errorf("this machine is broken, its tasks were handed back: %w", err)}
	}
	logger.Info("worker: shutting down")
	w.Shutdown()
	return nil
}
