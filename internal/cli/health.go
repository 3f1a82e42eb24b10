package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// probed is the part of jobs.Worker the health endpoints ask.
type probed interface {
	Ping() error                       // Redis reachable: readiness
	Wedged(budget time.Duration) error // a task stuck past its deadline: liveness
}

// workerHealth is what a worker's two probes report.
//
// /healthz is liveness: 200 while the process works, 503 only when a
// task's handler has run more than the liveness budget past its deadline
// (wedged: restarting the process is the cure). A Redis outage is not a
// reason: the build in progress finishes on its own and its result lands
// when Redis is back, and a restart would throw it away (issue 34).
//
// /readyz is readiness: 200 while the worker reaches Redis and its machine
// is not broken; 503 with the reason otherwise, so that an orchestrator
// and an operator see it cannot take work now.
type workerHealth struct {
	redis probed
	// budget is how long past its deadline a task may run before /healthz
	// says the process is wedged.
	budget time.Duration
	// metrics, if set, is served at /metrics beside /healthz.
	metrics http.Handler

	mu     sync.Mutex
	broken error
	ch     chan error // receives the first breakage, once
}

func newWorkerHealth(p probed, budget time.Duration) *workerHealth {
	return &workerHealth{redis: p, budget: budget, ch: make(chan error, 1)}
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
		// A broken machine is not wedged: it hands its tasks back and
		// exits by itself (status 3); a restart before then would cut
		// the hand-back short.
		if err := h.redis.Wedged(h.budget); err != nil {
			http.Error(w, "wedged: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Broken(); err != nil {
			http.Error(w, "broken: this machine cannot run tasks, it is handing them back and exiting: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := pingWithin(h.redis, readyPingTimeout); err != nil {
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

// readyPingTimeout bounds /readyz's Redis ping: the kubelet's probe
// timeout is 1 s by default, and a dial to a Redis that is gone can take
// go-redis's retries and dial timeout, seconds.
const readyPingTimeout = 800 * time.Millisecond

// pingWithin is p.Ping(), or an error once d has passed without an answer
// (the ping goes on in the background and its answer is dropped).
func pingWithin(p probed, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- p.Ping() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("no answer to a ping within %s", d)
	}
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
