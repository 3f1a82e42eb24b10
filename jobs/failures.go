package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// isFailure tells asynq which errors are failures. Handing a task to the
// right platform, or back while the slots are busy, is not one.
func isFailure(err error) bool {
	return !errors.Is(err, gpu.ErrWrongPlatform) && !errors.Is(err, errSlotsBusy)
}

// onTaskError runs for every failed attempt (asynq calls it before it
// retries or archives the task). Every failure gets one line in the
// worker's log and is recorded on its pending graph, so that a person sees
// why a graph retries. Retries are budgeted by time, not by count: a graph
// whose failures have gone on for RetryBudget gives up (is recorded as
// failed, and its run finalizes) instead of retrying until a count runs
// out, so an outage of minutes costs nothing and a permanent fault costs
// one budget. A task archived at once (SkipRetry) whose handler could not
// record its graph is recorded here.
func (w *Worker) onTaskError(ctx context.Context, t *asynq.Task, err error) {
	if !isFailure(err) {
		return
	}
	// The task's own context may be over (a timeout); this bookkeeping
	// must still happen.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch t.Type() {
	case TypeGraph:
		w.graphFailed(bctx, t, err)
	case TypeFinalize:
		w.finalizeFailed(bctx, t, err)
	}
}

func (w *Worker) graphFailed(ctx context.Context, t *asynq.Task, err error) {
	var p GraphPayload
	if json.Unmarshal(t.Payload(), &p) != nil || p.Run == "" || p.Graph == "" {
		w.warnf("task %s failed: %v", t.Type(), err)
		return
	}
	class := backend.ClassOf(err, backend.FailInfrastructure)
	n, _ := w.runs.Attempts(ctx, p.Run, p.Graph)
	pending, perr := w.runs.IsPending(ctx, p.Run, p.Graph)
	if perr != nil {
		w.warnf("run %s graph %s attempt %d failed (%s): %v; recording it failed too: %v (the reconciler will look again)", p.Run, p.Graph, n, class, err, perr)
		return
	}
	if !pending {
		// Recorded by the handler (a deterministic failure, a quarantine).
		if errors.Is(err, errRecordedFailure) {
			return // and logged by it, with its class
		}
		w.warnf("run %s graph %s attempt %d failed (%s): %v", p.Run, p.Graph, n, class, err)
		return
	}
	giveUp := errors.Is(err, asynq.SkipRetry) || !class.Retryable()
	reason := err.Error()
	if !giveUp {
		since, rerr := w.runs.AttemptFailed(ctx, p.Run, p.Graph, n, string(class), err.Error())
		if rerr != nil {
			w.warnf("run %s graph %s attempt %d failed (%s), will retry: %v; recording it failed: %v", p.Run, p.Graph, n, class, err, rerr)
			return
		}
		if failing := time.Since(since); failing >= w.cfg.RetryBudget {
			giveUp = true
			reason = fmt.Sprintf("giving up after %d attempt(s) failing for %s (retry budget %s): %v", n, failing.Round(time.Second), w.cfg.RetryBudget, err)
		} else {
			w.warnf("run %s graph %s attempt %d failed (%s), will retry: %v", p.Run, p.Graph, n, class, err)
			return
		}
	}
	w.warnf("run %s graph %s attempt %d failed (%s), giving up: %s", p.Run, p.Graph, n, class, firstLine(reason))
	target, terr := w.runs.Target(ctx, p.Run)
	if terr != nil {
		w.warnf("run %s graph %s: recording it failed: %v (the reconciler will look again)", p.Run, p.Graph, terr)
		return
	}
	if cerr := w.completeGraph(ctx, p.Run, target, p.Graph, runstate.GraphStatus{
		Status: runstate.GraphFailed, Class: string(class), Message: reason, Worker: w.cfg.Name, Attempts: n,
	}, nil, false, nil); cerr != nil {
		w.warnf("run %s graph %s: recording it failed: %v (the reconciler will look again)", p.Run, p.Graph, cerr)
	}
}

// finalizeFailed ends a run whose finalize cannot succeed as failed, with
// the reason, instead of leaving it running: a deterministic failure
// (SkipRetry) at once, a retryable one when its failures have gone on for
// the retry budget.
func (w *Worker) finalizeFailed(ctx context.Context, t *asynq.Task, err error) {
	var p FinalizePayload
	if json.Unmarshal(t.Payload(), &p) != nil || p.Run == "" {
		w.warnf("task %s failed: %v", t.Type(), err)
		return
	}
	giveUp := errors.Is(err, asynq.SkipRetry)
	if !giveUp {
		since, rerr := w.runs.FinalizeFailed(ctx, p.Run)
		if rerr != nil {
			w.warnf("run %s: finalize failed, will retry: %v; recording it: %v", p.Run, err, rerr)
			return
		}
		giveUp = time.Since(since) >= w.cfg.RetryBudget
	}
	if !giveUp {
		w.warnf("run %s: finalize failed, will retry: %v", p.Run, err)
		return
	}
	w.giveUpFinalize(ctx, p.Run, err)
}

// giveUpFinalize ends a run whose finalize cannot succeed as failed.
func (w *Worker) giveUpFinalize(ctx context.Context, run string, err error) {
	w.warnf("run %s: finalize failed, giving up: %v", run, err)
	if _, ferr := w.runs.Finish(ctx, run, runstate.RunFailed, "finalize failed: "+firstLine(err.Error()), ""); ferr != nil && !errors.Is(ferr, runstate.ErrNoRun) {
		w.warnf("run %s: recording its failed finalize: %v (the reconciler will look again)", run, ferr)
	}
}

// completeFailed records a graph as failed and returns ret marked
// SkipRetry, for the handler to return.
func (w *Worker) completeFailed(ctx context.Context, spec *RunSpec, graph string, class backend.FailureClass, msg string, ret error) error {
	if err := w.complete(ctx, spec, graph, runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(class), Message: msg, Worker: w.cfg.Name}, nil, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ret, asynq.SkipRetry)
}

// complete records a graph's final status, for attempt a when it is the
// attempt's own end (nil otherwise); whoever completes the last graph
// enqueues finalize.
func (w *Worker) complete(ctx context.Context, spec *RunSpec, graph string, st runstate.GraphStatus, res *tuner.Result, a *attempt) error {
	if st.Status == runstate.GraphDone {
		st.Bench = history.ResultBench(res)
		st.Speedup = res.Speedup()
		if res.Reused {
			st.ReusedFrom = res.ReusedFrom
		}
	}
	return w.completeGraph(ctx, spec.Run, spec.Target, graph, st, res, true, a)
}

// recordGraph is runstate's CompleteGraph, waiting out a Redis that cannot
// be reached (a restart, a node upgrade) until it answers or the task's
// deadline: the build is done and its engine stored, and failing the
// attempt now would throw it away and build it again (issue 34).
func (w *Worker) recordGraph(ctx context.Context, run, graph string, st runstate.GraphStatus, progress bool) (bool, int, error) {
	said := false
	for {
		first, remaining, err := w.runs.CompleteGraphProgress(ctx, run, graph, st, progress)
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return first, remaining, err
		}
		if !said {
			w.warnf("run %s graph %s: Redis is unreachable (%v); keeping the result and waiting for it", run, graph, err)
			said = true
		}
		select {
		case <-ctx.Done():
			return first, remaining, err
		case <-time.After(min(w.cfg.RetryUnit, time.Second)):
		}
	}
}

// unreachable tells a Redis that could not be reached (no connection, a
// connection cut) from one that answered with an error.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// completeGraph records a graph's final status; whoever completes the last
// graph finalizes the run, at once when inline (finalizeNow), else by
// enqueuing its finalize (a second enqueue is a no-op). The attempt that
// completes it also writes res (if any) as the graph's result.json at once:
// readers need not wait for finalize, and a run Redis loses is rebuilt
// from these. Finalize publishes the same result again.
//
// When a is the attempt that ends with this completion (nil otherwise), it
// reports no more progress from here on (no write lands after the
// completion dropped the record), and the completion looks for a record
// only where one may be (progressRecord.stop): a task that reported
// nothing costs no command for it, and one whose record the completion
// dropped needs no clear at its end.
func (w *Worker) completeGraph(ctx context.Context, run, target, graph string, st runstate.GraphStatus, res *tuner.Result, inline bool, a *attempt) error {
	progress := true
	if a != nil {
		progress = a.progress.stop(a.n)
	}
	first, remaining, err := w.recordGraph(ctx, run, graph, st, progress)
	if errors.Is(err, runstate.ErrNoRun) {
		// Redis lost the run while this attempt ran: rebuild it from the
		// store, then record the graph.
		if _, rerr := Restore(ctx, w.runs, w.cfg.Store, run); rerr != nil {
			return rerr
		}
		first, remaining, err = w.runs.CompleteGraphProgress(ctx, run, graph, st, progress)
	}
	if err != nil {
		return err
	}
	if a != nil && first && progress {
		a.progress.dropped()
	}
	if first && res != nil {
		if err := putResult(ctx, w.cfg.Store, run, graph, res); err != nil {
			return fmt.Errorf("publish graph %s result: %w", graph, err)
		}
	}
	if remaining == 0 {
		if inline {
			return w.finalizeNow(ctx, run, target)
		}
		return enqueueFinalize(ctx, w.runs, w.q, run, target)
	}
	return nil
}
