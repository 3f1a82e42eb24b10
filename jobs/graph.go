package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/resultindex"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// ProcessGraph tunes one graph of a run.
//
// What needs no slot happens before the task takes one: binding the run to
// the platform, the result-index lookup and downloading the graph's inputs.
// A prefetched task (WorkerConfig.Prefetch) thus downloads while the slots
// are busy, and a task that is handed back or reuses an indexed result
// never waits for a slot. The slot is released as soon as tuning ends, so
// the next task tunes while this one uploads its engine. Workers whose slots
// are of different platforms (mixed GPUs) learn the platform only from the
// slot, and do it all after taking one.
//
// An error returned here is one failed attempt: onTaskError records it and
// decides, by the retry budget, whether the graph gives up.
//
// Every task is counted by the worker's Observer and, once its attempt
// starts, logged at its start and end.
func (w *Worker) ProcessGraph(ctx context.Context, t *asynq.Task) error {
	queue, _ := asynq.GetQueueName(ctx)
	start := time.Now()
	w.cfg.Observer.TaskStarted(queue)
	a := &attempt{queue: queue}
	defer a.cleanup()
	err := w.processGraph(ctx, t, a)
	w.endReport(ctx, a)
	d := time.Since(start)
	oc, class := outcome(ctx, a, err)
	w.logTaskEnd(queue, a, oc, class, err, d)
	w.cfg.Observer.TaskFinished(queue, oc, class, d)
	return err
}

// processGraph is ProcessGraph's work, on attempt a.
func (w *Worker) processGraph(ctx context.Context, t *asynq.Task, a *attempt) error {
	p := &a.p
	if err := json.Unmarshal(t.Payload(), p); err != nil || p.V != PayloadVersion || p.Run == "" || p.Graph == "" {
		return fmt.Errorf("tune:graph: bad payload %q (version %d): %w", t.Payload(), p.V, asynq.SkipRetry)
	}
	if n, _ := asynq.GetRetryCount(ctx); n == 0 && !p.EnqueuedAt.IsZero() {
		w.cfg.Observer.QueueWait(a.queue, max(time.Since(p.EnqueuedAt), 0))
	}
	var b runstate.Beginning
	var err error
	if w.platform != "" {
		// One round trip: is the graph pending, bind the run, start the
		// attempt (the path of every task, so its Redis cost is the
		// queue's cost per task).
		if b, err = w.begin(ctx, p.Run, p.Graph, w.runs.Begin); err != nil {
			return err
		}
		if b.Pending {
			if b.Attempt == 0 {
				return w.handBack(ctx, a, b.Bound, w.platform)
			}
			a.n, a.want = b.Attempt, w.platform
			if err := w.lookup(ctx, a, w.platform); err != nil || a.finished {
				return err
			}
			if a.res != nil {
				return w.finish(ctx, a, w.platform) // reused: no slot needed
			}
		}
	} else if b, err = w.begin(ctx, p.Run, p.Graph, w.taskState); err != nil {
		return err
	}
	if !b.Pending {
		// A retry after the graph was completed (or its run cancelled): if
		// the attempt that completed it died before enqueuing finalize (or
		// the enqueue failed), this is the moment to make up for it. Once
		// a finalize task is recorded as queued, Redis no longer asks for
		// this (Beginning.FinalizeTarget), and such a task costs one round
		// trip.
		if b.FinalizeTarget == "" {
			return nil
		}
		return enqueueFinalizeAt(ctx, w.runs, w.q, p.Run, b.FinalizeTarget, b.FinalizeGen)
	}
	want := w.platform
	if want == "" {
		// Slots of several platforms: a run bound to one of them takes a
		// slot of it (one bound to none of them is handed back below).
		if bound, err := w.runs.BoundPlatform(ctx, p.Run); err != nil {
			return err
		} else if has(w.all, bound) {
			want = bound
		}
	}
	a.want = want
	sl, err := w.slots.takeOr(ctx, want, w.cfg.Prefetch, func() { w.report(ctx, a, runstate.PhaseWaiting, nil) })
	if err != nil {
		return err // errSlotsBusy: back to the queue, not a failure
	}
	a.held = true
	release := func() {
		if a.held {
			w.slots.put(sl)
			a.held = false
		}
	}
	defer release()
	if a.spec == nil {
		if err := w.prepare(ctx, a, sl.platform); err != nil || a.finished {
			return err
		}
	}
	if a.res == nil {
		res, err := w.tuneGuarded(ctx, a, sl)
		if errors.Is(err, errRunCancelled) {
			w.logf("run %s graph %s: the run was cancelled; attempt %d stopped", p.Run, p.Graph, a.n)
			a.cancelled = true
			return nil
		}
		if err != nil {
			// A deterministic error (a profile the graph cannot have, a
			// batch beyond the limits) is not tried again: onTaskError
			// records the graph as failed with its class.
			if !backend.ClassOf(err, backend.FailInfrastructure).Retryable() {
				return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
			}
			return err
		}
		a.res = res
	}
	release()
	return w.finish(ctx, a, sl.platform)
}

// begin asks Redis where a task stands, with ask (Runs.Begin for a
// one-platform worker, Worker.taskState for one of several platforms),
// rebuilding from the store a run that Redis lost (a restart without
// persistence): the store is the record of truth, and a task of a run
// Redis forgot must neither be dropped nor tuned without bookkeeping.
func (w *Worker) begin(ctx context.Context, run, graph string, ask beginFunc) (runstate.Beginning, error) {
	b, err := ask(ctx, run, graph, w.platform, w.cfg.Name)
	if !errors.Is(err, runstate.ErrNoRun) {
		return b, err
	}
	if _, rerr := Restore(ctx, w.runs, w.cfg.Store, run); rerr != nil {
		if errors.Is(rerr, runstate.ErrNoRun) {
			return b, fmt.Errorf("run %s is known neither to Redis nor to %s: %w", run, w.cfg.Store, asynq.SkipRetry)
		}
		return b, rerr
	}
	w.warnf("run %s: Redis had lost it; its record was rebuilt from %s", run, w.cfg.Store)
	return ask(ctx, run, graph, w.platform, w.cfg.Name)
}

// beginFunc is how begin asks: Runs.Begin's signature.
type beginFunc func(ctx context.Context, run, graph, platform, worker string) (runstate.Beginning, error)

// taskState is Runs.TaskState as a beginFunc: a worker of several
// platforms binds the run and starts the attempt once it holds a slot.
func (w *Worker) taskState(ctx context.Context, run, graph, _, _ string) (runstate.Beginning, error) {
	return w.runs.TaskState(ctx, run, graph)
}

// attempt is one run of a graph's task, as it goes through ProcessGraph.
type attempt struct {
	p        GraphPayload
	queue    string
	n        int // numbered when it starts (runstate.Runs.StartAttempt): 1 for the first
	spec     *RunSpec
	dir      string         // scratch: the graph's bundle and the tuner's output
	bundle   *bundle.Bundle // the graph's inputs, downloaded
	res      *tuner.Result  // tuned, or taken from the result index
	finished bool           // handled (handed back or failed) before tuning
	// cancelled: stopped because its run was cancelled.
	cancelled bool
	// What the attempt reported (progress.go): the slot's platform it
	// wants, whether it holds a slot, when it began, its phase and since
	// when, and the candidates its benchmark measures.
	want       string
	held       bool
	began      time.Time
	phase      string
	phaseSince time.Time
	measuring  []string
	progress   progressRecord // what of it reached Redis (progress.go)
}

func (a *attempt) cleanup() {
	if a.dir != "" {
		os.RemoveAll(a.dir)
		a.dir = ""
	}
}

// prepare binds the run to platform (handing the task back when the run is
// bound to another), records the attempt, reads run.json and either takes
// the indexed result of the graph's work key or downloads its inputs. An
// error, or a.finished, ends the task.
func (w *Worker) prepare(ctx context.Context, a *attempt, platform string) error {
	p := a.p
	// A run's graphs are all tuned on one platform, so that its module
	// state never mixes engines or timings of different GPUs or TensorRT
	// versions: the first worker to start a graph binds the run.
	bound, err := w.runs.BindPlatform(ctx, p.Run, platform)
	if err != nil {
		return err
	}
	if bound != platform {
		return w.handBack(ctx, a, bound, platform)
	}
	if a.n, err = w.runs.StartAttempt(ctx, p.Run, p.Graph, w.cfg.Name); err != nil {
		return err
	}
	return w.lookup(ctx, a, platform)
}

// handBack hands the task back to the queue: its run is bound to another
// platform than this worker's (or this slot's). A task handed back too
// often fails its graph.
func (w *Worker) handBack(ctx context.Context, a *attempt, bound, platform string) error {
	p := a.p
	a.finished = true
	n, err := w.runs.HandBack(ctx, p.Run, p.Graph)
	if err != nil {
		return err
	}
	w.cfg.Observer.HandedBack()
	if n > w.cfg.MaxHandBacks {
		// No worker of the run's platform has taken it for this long:
		// fail the graph (and so the run) rather than bounce forever.
		var spec RunSpec
		if err := artifacts.GetJSON(ctx, w.cfg.Store, artifacts.RunKey(p.Run), &spec); err != nil {
			return err
		}
		msg := fmt.Sprintf("the run is bound to platform %s, and no worker of it took this graph after %d hand-backs", bound, n-1)
		return w.completeFailed(ctx, &spec, p.Graph, backend.FailInfrastructure, msg, fmt.Errorf("run %s graph %s: %s", p.Run, p.Graph, msg))
	}
	return &gpu.PlatformError{Task: bound, Worker: []string{platform}, Class: w.cfg.Fingerprint.Class()}
}

// lookup goes on with attempt a.n, started: it reads run.json and either
// takes the indexed result of the graph's work key or downloads its
// inputs.
func (w *Worker) lookup(ctx context.Context, a *attempt, platform string) error {
	p := a.p
	w.cfg.Logger.Info("task started", "run", p.Run, "graph", p.Graph, "queue", a.queue, "attempt", a.n, "platform", platform)
	spec, err := w.specs.get(ctx, p.Run)
	if err != nil {
		return err
	}
	a.spec = spec
	// Incremental: the same work on the same platform has a result already,
	// reused when it was measured as this run asks (the same bench time
	// and warm-up) and the run does not ask to measure again: otherwise
	// the graph is measured and its result supersedes the indexed one.
	indexed, err := resultindex.Get(ctx, w.cfg.Store, platform, p.WorkKey)
	reuse := err == nil && indexed.OK() && !spec.Remeasure && resultindex.Measured(indexed, spec.StopRule())
	if err == nil && indexed.OK() && !reuse {
		w.logf("run %s graph %s: measuring again (%s) instead of reusing the result of work key %s on %s measured by run %s",
			p.Run, p.Graph, remeasureWhy(spec, indexed), p.WorkKey[:12], platform, cmp.Or(indexed.ReusedFrom, indexed.Run))
	}
	if reuse {
		// Reuse verifies content: a result whose blobs are damaged is
		// dropped from the index and tuned again (its upload repairs them).
		if reuse, err = w.indexedReusable(ctx, platform, p.WorkKey, indexed); err != nil {
			return err
		}
	}
	if err == nil || errors.Is(err, artifacts.ErrNotExist) {
		w.cfg.Observer.ResultIndexLookup(reuse)
	}
	if reuse {
		w.logf("run %s graph %s: reusing the result of work key %s on %s", p.Run, p.Graph, p.WorkKey[:12], platform)
		indexed.MarkReused(p.Run)
		a.res = indexed
		return nil
	}
	if err != nil && !errors.Is(err, artifacts.ErrNotExist) {
		return err
	}
	if a.dir, err = newScratch(w.cfg.WorkDir); err != nil {
		return err
	}
	w.report(ctx, a, runstate.PhaseDownload, nil)
	downloaded := w.timePhase(PhaseDownload)
	a.bundle, err = materialize(w.withTransfers(ctx, DirectionDown), w.cfg.Store, spec, p.Graph, filepath.Join(a.dir, "bundle"))
	downloaded()
	if err != nil {
		a.finished = true
		return err
	}
	return nil
}

// errRunCancelled ends an attempt whose run `producer cancel` stopped.
var errRunCancelled = errors.New("the run was cancelled")

// tuneGuarded tunes in slot sl with what a poison graph needs around it:
// the attempt is marked as tuning (an attempt that dies with its worker is
// counted, and a graph that has killed MaxDeaths workers is quarantined
// instead of taking the next one down), the run's cancellation stops it,
// and a panic fails the graph as a build failure instead of being retried
// on every worker.
func (w *Worker) tuneGuarded(ctx context.Context, a *attempt, sl slot) (res *tuner.Result, err error) {
	p := a.p
	deaths, err := w.runs.BeginTuning(ctx, p.Run, p.Graph, a.n)
	if err != nil {
		return nil, err
	}
	defer func() {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		w.runs.EndTuning(ectx, p.Run, p.Graph, a.n)
	}()
	if deaths >= w.cfg.MaxDeaths {
		msg := fmt.Sprintf("quarantined: attempts at this graph killed their worker %d times (limit %d); it is not tried again", deaths, w.cfg.MaxDeaths)
		a.finished = true
		return nil, w.completeFailed(ctx, a.spec, p.Graph, backend.FailInfrastructure, msg, fmt.Errorf("run %s graph %s: %s", p.Run, p.Graph, msg))
	}
	tctx, stop := w.watchCancel(ctx, p.Run)
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("tuning panicked: %v\n%s", r, debug.Stack())
			w.warnf("run %s graph %s attempt %d: %s", p.Run, p.Graph, a.n, firstLine(msg))
			res, err = nil, w.completeFailed(ctx, a.spec, p.Graph, backend.FailBuild, msg, fmt.Errorf("run %s graph %s: tuning panicked: %v", p.Run, p.Graph, r))
		}
	}()
	res, err = w.tune(tctx, a, sl)
	if err != nil && context.Cause(tctx) == errRunCancelled {
		return nil, errRunCancelled
	}
	return res, err
}

// watchCancel returns a context that ends, with cause errRunCancelled, when
// the run is cancelled: in-flight candidates stop at their next check of
// the context (the backends kill their child processes with it).
func (w *Worker) watchCancel(ctx context.Context, run string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(w.cfg.CancelPoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if c, err := w.runs.CancelRequested(cctx, run); err == nil && c {
					cancel(errRunCancelled)
					return
				}
			}
		}
	}()
	return cctx, func() { close(done); cancel(nil) }
}

// tune runs the tuner on the downloaded graph in slot sl.
func (w *Worker) tune(ctx context.Context, a *attempt, sl slot) (*tuner.Result, error) {
	spec := a.spec
	strat, err := strategy.Parse(spec.Strategy, spec.LatencyBudgetMs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	var cands []backend.Candidate
	for _, s := range spec.Candidates {
		c, err := backend.ParseCandidate(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		cands = append(cands, c)
	}
	rule := spec.StopRule()
	var known map[string]backend.CandidateResult
	if !spec.RetryFailed {
		if known, err = resultindex.KnownFailures(ctx, w.cfg.Store, resultindex.ToolchainOf(w.cfg.Fingerprint), sl.platform, a.p.WorkKey, spec.Candidates); err != nil {
			return nil, err
		}
	}
	w.logf("run %s graph %s: tuning %d candidate(s) with %s", a.p.Run, a.p.Graph, len(cands), spec.Strategy)
	res, err := tuner.TuneGraph(ctx, a.bundle, a.p.Graph, filepath.Join(a.dir, "out"), tuner.Options{
		Backends: w.cfg.Backends, Strategy: strat, Candidates: cands, StopRule: rule,
		CandidateTimeout: spec.CandidateTime, Progress: w.stepLog(ctx), Env: sl.env, BundleDigest: spec.BundleDigest,
		Known: known, Observe: w.stepReporter(ctx, a), NoCalls: true, FindMaxBatch: spec.FindMaxBatch, Baseline: spec.Baseline,
	})
	if err != nil {
		return nil, err
	}
	res.Worker = w.cfg.Name
	res.Platform = sl.platform
	res.Run = a.p.Run
	return res, nil
}

// finish stores the attempt's result and completes the graph, or lets a
// retryable failure try again.
func (w *Worker) finish(ctx context.Context, a *attempt, platform string) error {
	p, spec, res := a.p, a.spec, a.res
	if !res.Reused {
		w.report(ctx, a, runstate.PhaseUpload, nil)
		uploaded := w.timePhase(PhaseUpload)
		err := w.upload(w.withTransfers(ctx, DirectionUp), a)
		uploaded()
		if err != nil {
			return err
		}
		// Deterministic failures go to the negative cache, for the next
		// run of this work on this platform and toolchain to skip.
		err = resultindex.RecordFailures(ctx, w.cfg.Store, resultindex.ToolchainOf(w.cfg.Fingerprint), platform, p.WorkKey,
			resultindex.Attempt{Run: p.Run, Graph: p.Graph, N: a.n}, res.Results)
		if err != nil {
			return err
		}
	}
	// A good result carries what its engine requires, into the index
	// and, reused, into every run that takes it from there.
	req, err := resultRequires(ctx, w.cfg.Store, res, platform)
	if err != nil {
		return err
	}
	res.Requires = req
	// Each attempt writes its own result; the one that completes the graph
	// (count-once, in Redis) is the one finalize publishes.
	key := artifacts.GraphAttemptResultKey(p.Run, p.Graph, a.n)
	if err := artifacts.PutJSON(ctx, w.cfg.Store, key, res); err != nil {
		return err
	}
	// Everything the task downloaded or built is stored: its directory
	// goes now, before the graph completes, so that a run that reads done
	// (its finalize may run on another of this worker's goroutines before
	// this task returns) has left nothing on the worker's disk.
	a.cleanup()
	if res.OK() && !res.Reused {
		// Candidates lost on the way to a winner: the graph's outcome
		// does not show them.
		for _, c := range res.Results {
			if c.Status == backend.StatusFailed {
				class := backend.FailRuntime
				if c.Failure != nil && c.Failure.Class != "" {
					class = c.Failure.Class
				}
				w.cfg.Observer.CandidateFailed(string(class))
			}
		}
	}
	if res.OK() {
		// Only a result with an engine is worth reusing.
		if res.Winner.Engine != nil && !res.Reused {
			if err := resultindex.Put(ctx, w.cfg.Store, platform, p.WorkKey, res); err != nil {
				return err
			}
		}
		w.logf("run %s graph %s: winner %s (%s)", p.Run, p.Graph, res.Winner.Candidate, res.Winner.Reason)
		reason := res.Winner.Reason
		if res.Reused {
			reason = "reused: " + reason
		}
		return w.complete(ctx, spec, p.Graph, runstate.GraphStatus{
			Status: runstate.GraphDone, Winner: res.Winner.Candidate, Reason: reason, ResultKey: key, Worker: w.cfg.Name, Attempts: a.n,
		}, res, a)
	}
	class := res.Failure.Class
	// Out of memory is worth one more try (the GPU may have been shared),
	// not more: the same engine on the same GPU runs out again.
	retryable := class.Retryable() && !(a.n > 1 && ranOutOfMemory(res))
	if retryable {
		// The machine, not the candidates: let another attempt (maybe on
		// another worker) try, within the retry budget; the result written
		// above stays as a record.
		return backend.Fail(class, "", fmt.Errorf("run %s graph %s: %s failure: %s", p.Run, p.Graph, class, res.Failure.Message))
	}
	w.logf("run %s graph %s: no winner (%s): %s", p.Run, p.Graph, class, res.Failure.Message)
	st := runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(class), Message: res.Failure.Message, ResultKey: key, Worker: w.cfg.Name, Attempts: a.n}
	if err := w.complete(ctx, spec, p.Graph, st, res, a); err != nil {
		return err
	}
	// Deterministic: archive at once instead of retrying.
	return fmt.Errorf("%w: %w: %w", backend.Failf(class, "", "run %s graph %s: no winner (%s)", p.Run, p.Graph, class), errRecordedFailure, asynq.SkipRetry)
}

// errRecordedFailure marks a graph failure the handler has recorded and
// logged already (a deterministic no-winner): onTaskError must not log it
// a second time.
var errRecordedFailure = errors.New("recorded")

// upload stores the engines and logs the result names as blobs, before the
// result that names them.
func (w *Worker) upload(ctx context.Context, a *attempt) error {
	res := a.res
	if !w.cfg.KeepLosingEngines {
		dropLosingEngines(res)
	}
	out := filepath.Join(a.dir, "out")
	for _, cr := range res.Results {
		for _, f := range cr.Artifacts {
			// The tuner digested every artifact already: read each once.
			ref := artifacts.Ref{SHA256: f.SHA256, Size: f.Size}
			if _, err := artifacts.PutFileAs(ctx, w.cfg.Store, filepath.Join(out, filepath.FromSlash(f.Path)), ref); err != nil {
				return fmt.Errorf("upload %s: %w", f.Path, err)
			}
		}
	}
	return nil
}

// ranOutOfMemory reports whether a candidate of the result failed for
// lack of memory (the backends' kinds end in "oom").
func ranOutOfMemory(res *tuner.Result) bool {
	for _, c := range res.Results {
		if c.Failure != nil && strings.HasSuffix(c.Failure.Kind, "oom") {
			return true
		}
	}
	return false
}

// dropLosingEngines removes the engines of the candidates that did not win
// from a result, so that every file the stored result names is in the store.
func dropLosingEngines(res *tuner.Result) {
	for i := range res.Results {
		if res.Winner != nil && i == res.Winner.Index {
			continue
		}
		cr := &res.Results[i]
		cr.Artifacts = slices.DeleteFunc(slices.Clone(cr.Artifacts), func(a backend.FileRef) bool { return a.Role == "engine" || a.Role == backend.RoleEngineData })
	}
}

// indexedReusable verifies the blobs of an indexed result before the
// worker reuses it (resultindex.Reusable): false, and the entry dropped,
// when they are damaged; an error is the store's.
func (w *Worker) indexedReusable(ctx context.Context, platform, workKey string, res *tuner.Result) (bool, error) {
	ok, damage, err := resultindex.Reusable(ctx, w.cfg.Store, platform, workKey, res)
	if damage != nil {
		w.logf("work key %s on %s: not reusing the indexed result, its blobs are damaged (%v); dropping %s and tuning again",
			shortKey(workKey), platform, damage, artifacts.ResultIndexKey(platform, workKey))
	}
	return ok, err
}

// remeasureWhy says why an indexed result of the graph's work is measured
// again rather than reused: the run asked for it, or it measures with
// another bench time or warm-up bound than the indexed result's.
func remeasureWhy(spec *RunSpec, indexed *tuner.Result) string {
	if spec.Remeasure {
		return "--remeasure"
	}
	want, had := spec.StopRule(), indexed.StopRule
	var parts []string
	if had.MaxTime != want.MaxTime {
		parts = append(parts, fmt.Sprintf("bench time %s → %s", had.MaxTime, want.MaxTime))
	}
	if had.WarmupLimit() != want.WarmupLimit() {
		parts = append(parts, fmt.Sprintf("warm-up %s → %s", had.WarmupLimit(), want.WarmupLimit()))
	}
	return strings.Join(parts, ", ")
}

func shortKey(k string) string { return k[:min(len(k), 12)] }
