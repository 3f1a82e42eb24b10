package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// WorkerConfig configures a queue worker.
type WorkerConfig struct {
	Redis    redis.UniversalClient
	Store    artifacts.Store
	Backends backend.Registry
	// Queues to serve: the target classes this worker's platform matches.
	Queues      []string
	Concurrency int
	// ShutdownTimeout is how long a graceful shutdown waits for running
	// tasks before handing them back to the queue (their child processes
	// are killed with the handler's context).
	ShutdownTimeout time.Duration
	// WorkDir holds per-task scratch directories; default os.TempDir().
	WorkDir string
	// Name identifies the worker in results (default hostname:pid).
	Name string
	// Log receives one line per task step; nil discards.
	Log io.Writer
	// Fingerprint is the machine: its platform keys bind runs, index
	// results and pin tasks to GPUs. Zero means a CPU machine named by
	// gpu.DetectDefault's CPU fingerprint (the caller normally passes it).
	Fingerprint gpu.Fingerprint
	// MaxHandBacks bounds how often a graph's task may be handed back
	// because it belongs to another platform (every 5 s): past it the
	// graph fails, naming the platform no worker served. Default 720
	// (about an hour).
	MaxHandBacks int
	// PollInterval is how often an idle worker asks Redis for work (asynq
	// polls; it does not block). Default 100ms: asynq's 1 s default would
	// add up to a second to every hand-over (a graph's task, then its
	// run's finalize), at a cost of ten cheap Redis calls per second.
	PollInterval time.Duration
	// Prefetch is how many tasks the worker takes beyond its slots (one per
	// GPU, or Concurrency on a CPU machine): a prefetched task downloads its
	// graph's inputs while the slots are busy, and takes a slot when one is
	// free. Default 1; negative for none; at most the number of slots.
	Prefetch int
	// KeepLosingEngines uploads the engines of every candidate that passed,
	// not only the winner's. By default a losing engine is left out of the
	// stored result.json and the store: nothing deploys it, and TensorRT
	// engines run to gigabytes per candidate per graph per night. Every
	// candidate's logs are always kept.
	KeepLosingEngines bool
}

// Worker serves tune:graph and tune:finalize tasks.
type Worker struct {
	cfg   WorkerConfig
	runs  *Runs
	q     *asynq.Client
	srv   *asynq.Server
	slots *slotPool // one per GPU (or one CPU slot per concurrent task)
	all   []slot
	// platform is the platform of every slot when they share one (every CPU
	// worker, a machine of identical GPUs), "" when they differ.
	platform string
}

// NewWorker builds a worker; Start begins serving.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if len(cfg.Queues) == 0 {
		return nil, fmt.Errorf("no queues to serve")
	}
	for _, q := range cfg.Queues {
		if err := CheckTarget(q); err != nil {
			return nil, fmt.Errorf("queue %w", err)
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = os.TempDir()
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("%s:%d", hostname(), os.Getpid())
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.MaxHandBacks == 0 {
		cfg.MaxHandBacks = 720
	}
	if cfg.Fingerprint.Kind == "" {
		cfg.Fingerprint = gpu.Fingerprint{Kind: gpu.KindCPU}
	}
	queues := map[string]int{}
	for _, q := range cfg.Queues {
		queues[Queue(q)] = 1
	}
	w := &Worker{cfg: cfg, runs: NewRuns(cfg.Redis), q: asynq.NewClientFromRedisClient(cfg.Redis)}
	fp := cfg.Fingerprint
	var slots []slot
	if fp.Kind == gpu.KindGPU && len(fp.GPUs) > 0 {
		// One GPU per task: as many tasks at once as GPUs, each pinned.
		for i := range fp.GPUs {
			dev, err := fp.ForDevice(i)
			if err != nil {
				return nil, err
			}
			slots = append(slots, slot{platform: dev.PlatformKey(), env: fp.VisibleDevices(i)})
		}
	} else {
		for range cfg.Concurrency {
			slots = append(slots, slot{platform: fp.PlatformKey()})
		}
	}
	cfg.Concurrency = len(slots)
	w.slots, w.all = newSlotPool(slots), slots
	w.platform = slots[0].platform
	for _, sl := range slots {
		if sl.platform != w.platform {
			w.platform = ""
		}
	}
	// A prefetched task waits for at most one task ahead of it, which its
	// timeout covers (newGraphTask): no more prefetched tasks than slots.
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 1
	}
	cfg.Prefetch = min(max(cfg.Prefetch, 0), len(slots))
	w.cfg = cfg
	w.srv = asynq.NewServerFromRedisClient(cfg.Redis, asynq.Config{
		// Slots plus prefetched tasks; finalize tasks need no slot and run
		// in the same count.
		Concurrency:       cfg.Concurrency + cfg.Prefetch,
		Queues:            queues,
		ShutdownTimeout:   cfg.ShutdownTimeout,
		TaskCheckInterval: cfg.PollInterval,
		RetryDelayFunc:    retryDelay,
		// Handing a task to the right platform is not a failure: it must
		// not use up the task's retries.
		IsFailure: func(err error) bool {
			return !errors.Is(err, gpu.ErrWrongPlatform) && !errors.Is(err, errSlotsBusy)
		},
		ErrorHandler: asynq.ErrorHandlerFunc(w.onTaskError),
		LogLevel:     asynq.WarnLevel,
		Logger:       quietLogger{w: cfg.Log},
	})
	return w, nil
}

// retryDelay retries a task whose worker died (lease expired) almost at
// once: the work was not wrong, the worker was gone. Other retryable
// failures back off as asynq does by default.
func retryDelay(n int, err error, t *asynq.Task) time.Duration {
	if errors.Is(err, asynq.ErrLeaseExpired) {
		return time.Second
	}
	if errors.Is(err, gpu.ErrWrongPlatform) {
		return 5 * time.Second // let a worker of the run's platform take it
	}
	if errors.Is(err, errSlotsBusy) {
		return 2 * time.Second // a slot of its platform, here or elsewhere, frees up
	}
	return asynq.DefaultRetryDelayFunc(n, err, t)
}

// Mux routes the task types to the worker's handlers.
func (w *Worker) Mux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeGraph, w.ProcessGraph)
	mux.HandleFunc(TypeFinalize, w.ProcessFinalize)
	return mux
}

// Start serves tasks in the background.
func (w *Worker) Start() error { return w.srv.Start(w.Mux()) }

// Shutdown stops taking tasks, waits up to ShutdownTimeout for running ones
// and hands the rest back to the queue.
func (w *Worker) Shutdown() {
	w.srv.Shutdown()
	w.q.Close()
}

// StopTaking stops taking new tasks; running ones finish (asynq's Stop).
func (w *Worker) StopTaking() { w.srv.Stop() }

// Ping checks the worker's Redis connection (for health checks).
func (w *Worker) Ping() error { return w.srv.Ping() }

func (w *Worker) logf(format string, args ...any) {
	fmt.Fprintf(w.cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

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
func (w *Worker) ProcessGraph(ctx context.Context, t *asynq.Task) error {
	var p GraphPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.V != PayloadVersion || p.Run == "" || p.Graph == "" {
		return fmt.Errorf("tune:graph: bad payload %q (version %d): %w", t.Payload(), p.V, asynq.SkipRetry)
	}
	pending, finalizeTarget, err := w.runs.TaskState(ctx, p.Run, p.Graph)
	if err != nil {
		return err
	}
	if !pending {
		// A retry after the graph was completed: if the attempt that
		// completed it died before enqueuing finalize (or the enqueue
		// failed), this is the moment to make up for it.
		if finalizeTarget != "" {
			return enqueueFinalize(ctx, w.q, p.Run, finalizeTarget)
		}
		return nil
	}
	retry, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	a := &attempt{p: p, retry: retry, last: retry >= maxRetry}
	defer a.cleanup()
	if w.platform != "" {
		if err := w.prepare(ctx, a, w.platform); err != nil || a.finished {
			return err
		}
		if a.res != nil {
			return w.finish(ctx, a, w.platform) // reused: no slot needed
		}
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
	sl, err := w.slots.take(ctx, want, w.cfg.Prefetch)
	if err != nil {
		return err // errSlotsBusy: back to the queue, not a failure
	}
	held := true
	release := func() {
		if held {
			w.slots.put(sl)
			held = false
		}
	}
	defer release()
	if a.spec == nil {
		if err := w.prepare(ctx, a, sl.platform); err != nil || a.finished {
			return err
		}
	}
	if a.res == nil {
		res, err := w.tune(ctx, a, sl)
		if err != nil {
			return w.attemptFailed(ctx, a, err)
		}
		a.res = res
	}
	release()
	return w.finish(ctx, a, sl.platform)
}

// attempt is one run of a graph's task, as it goes through ProcessGraph.
type attempt struct {
	p        GraphPayload
	n        int  // numbered when it starts (Runs.StartAttempt): 1 for the first
	retry    int  // asynq's retry count: 0 for the first try
	last     bool // asynq retries no more after this one
	spec     *RunSpec
	dir      string         // scratch: the graph's bundle and the tuner's output
	bundle   *bundle.Bundle // the graph's inputs, downloaded
	res      *tuner.Result  // tuned, or taken from the result index
	finished bool           // handled (handed back or failed) before tuning
}

func (a *attempt) cleanup() {
	if a.dir != "" {
		os.RemoveAll(a.dir)
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
		a.finished = true
		n, err := w.runs.HandBack(ctx, p.Run, p.Graph)
		if err != nil {
			return err
		}
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
	if a.n, err = w.runs.StartAttempt(ctx, p.Run, p.Graph, w.cfg.Name); err != nil {
		return err
	}
	var spec RunSpec
	if err := artifacts.GetJSON(ctx, w.cfg.Store, artifacts.RunKey(p.Run), &spec); err != nil {
		if errors.Is(err, artifacts.ErrNotExist) {
			return fmt.Errorf("run %s has no run.json in %s: %w", p.Run, w.cfg.Store, asynq.SkipRetry)
		}
		return err
	}
	a.spec = &spec
	// Incremental: the same work on the same platform has a result already.
	var indexed tuner.Result
	err = artifacts.GetJSON(ctx, w.cfg.Store, artifacts.ResultIndexKey(platform, p.WorkKey), &indexed)
	if err == nil && indexed.OK() {
		w.logf("run %s graph %s: reusing the result of work key %s on %s", p.Run, p.Graph, p.WorkKey[:12], platform)
		indexed.Reused = true
		a.res = &indexed
		return nil
	}
	if err != nil && !errors.Is(err, artifacts.ErrNotExist) {
		return err
	}
	if a.dir, err = os.MkdirTemp(w.cfg.WorkDir, "tunefleet-task-"); err != nil {
		return err
	}
	if a.bundle, err = materialize(ctx, w.cfg.Store, &spec, p.Graph, filepath.Join(a.dir, "bundle")); err != nil {
		return w.attemptFailed(ctx, a, err)
	}
	return nil
}

// attemptFailed decides what an error before a result means: asynq tries
// again, unless this was the last attempt, which fails the graph.
func (w *Worker) attemptFailed(ctx context.Context, a *attempt, err error) error {
	a.finished = true
	if ctx.Err() != nil || !a.last || errors.Is(err, asynq.SkipRetry) {
		return err // cancelled (shutdown, timeout), retryable, or archived at once (the error handler records it)
	}
	return w.completeFailed(ctx, a.spec, a.p.Graph, backend.FailInfrastructure, err.Error(),
		fmt.Errorf("run %s graph %s: giving up after %d attempts: %w", a.p.Run, a.p.Graph, a.n, err))
}

// tune runs the tuner on the downloaded graph in slot sl.
func (w *Worker) tune(ctx context.Context, a *attempt, sl slot) (*tuner.Result, error) {
	spec := a.spec
	strat, err := strategy.Parse(spec.Strategy, spec.LatencyBudgetMs)
	if err != nil {
		return nil, err
	}
	var cands []backend.Candidate
	for _, s := range spec.Candidates {
		c, err := backend.ParseCandidate(s)
		if err != nil {
			return nil, err
		}
		cands = append(cands, c)
	}
	rule := backend.DefaultStopRule()
	if spec.BenchTime > 0 {
		rule.MaxTime = spec.BenchTime
	}
	w.logf("run %s graph %s: tuning %d candidate(s) with %s", a.p.Run, a.p.Graph, len(cands), spec.Strategy)
	res, err := tuner.TuneGraph(ctx, a.bundle, a.p.Graph, filepath.Join(a.dir, "out"), tuner.Options{
		Backends: w.cfg.Backends, Strategy: strat, Candidates: cands, StopRule: rule,
		CandidateTimeout: spec.CandidateTime, Progress: w.cfg.Log, Env: sl.env, BundleDigest: spec.BundleDigest,
	})
	if err != nil {
		return nil, err
	}
	res.Worker = w.cfg.Name
	res.Platform = sl.platform
	return res, nil
}

// finish stores the attempt's result and completes the graph, or lets a
// retryable failure try again.
func (w *Worker) finish(ctx context.Context, a *attempt, platform string) error {
	p, spec, res, retry, last := a.p, a.spec, a.res, a.retry, a.last
	if !res.Reused {
		if err := w.upload(ctx, a); err != nil {
			return w.attemptFailed(ctx, a, err)
		}
	}
	// Each attempt writes its own result; the one that completes the graph
	// (count-once, in Redis) is the one finalize publishes.
	key := artifacts.GraphAttemptResultKey(p.Run, p.Graph, a.n)
	if err := artifacts.PutJSON(ctx, w.cfg.Store, key, res); err != nil {
		return err
	}
	if res.OK() {
		// Only a result with an engine is worth reusing.
		if res.Winner.Engine != nil && !res.Reused {
			if err := artifacts.PutJSON(ctx, w.cfg.Store, artifacts.ResultIndexKey(platform, p.WorkKey), res); err != nil {
				return err
			}
		}
		w.logf("run %s graph %s: winner %s (%s)", p.Run, p.Graph, res.Winner.Candidate, res.Winner.Reason)
		reason := res.Winner.Reason
		if res.Reused {
			reason = "reused: " + reason
		}
		return w.complete(ctx, spec, p.Graph, GraphStatus{
			Status: GraphDone, Winner: res.Winner.Candidate, Reason: reason, ResultKey: key, Worker: w.cfg.Name, Attempts: a.n,
		}, res)
	}
	class := res.Failure.Class
	// Out of memory is worth one more try (the GPU may have been shared),
	// not more: the same engine on the same GPU runs out again.
	if retry >= 1 && ranOutOfMemory(res) {
		last = true
	}
	if class.Retryable() && !last {
		// The machine, not the candidates: let another attempt (maybe on
		// another worker) try; the result written above stays as a record.
		return fmt.Errorf("run %s graph %s: %s failure, will retry: %s", p.Run, p.Graph, class, res.Failure.Message)
	}
	w.logf("run %s graph %s: no winner (%s): %s", p.Run, p.Graph, class, res.Failure.Message)
	st := GraphStatus{Status: GraphFailed, Class: string(class), Message: res.Failure.Message, ResultKey: key, Worker: w.cfg.Name, Attempts: a.n}
	if err := w.complete(ctx, spec, p.Graph, st, res); err != nil {
		return err
	}
	// Deterministic: archive at once instead of retrying.
	return fmt.Errorf("run %s graph %s: no winner (%s): %w", p.Run, p.Graph, class, asynq.SkipRetry)
}

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

// onTaskError runs for every failed attempt. When asynq is about to
// archive a tune:graph task (retries used up, SkipRetry, or a timeout on
// the last attempt) whose graph is still pending, the graph is recorded as
// failed here, so that its run still finalizes instead of waiting forever.
func (w *Worker) onTaskError(ctx context.Context, t *asynq.Task, err error) {
	if t.Type() != TypeGraph {
		return
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	if retried < maxRetry && !errors.Is(err, asynq.SkipRetry) {
		return
	}
	var p GraphPayload
	if json.Unmarshal(t.Payload(), &p) != nil || p.Run == "" || p.Graph == "" {
		return
	}
	// The task's own context may be over (a timeout); this bookkeeping
	// must still happen.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	pending, perr := w.runs.IsPending(bctx, p.Run, p.Graph)
	if perr != nil || !pending {
		return
	}
	st, gerr := w.runs.Get(bctx, p.Run)
	if gerr != nil {
		return
	}
	class := backend.ClassOf(err, backend.FailInfrastructure)
	w.logf("run %s graph %s: giving up (%s): %v", p.Run, p.Graph, class, err)
	_, remaining, cerr := w.runs.CompleteGraph(bctx, p.Run, p.Graph, GraphStatus{
		Status: GraphFailed, Class: string(class), Message: err.Error(), Worker: w.cfg.Name, Attempts: retried + 1,
	})
	if cerr == nil && remaining == 0 {
		enqueueFinalize(bctx, w.q, p.Run, st.Target)
	}
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
		cr.Artifacts = slices.DeleteFunc(slices.Clone(cr.Artifacts), func(a backend.FileRef) bool { return a.Role == "engine" })
	}
}

func (w *Worker) completeFailed(ctx context.Context, spec *RunSpec, graph string, class backend.FailureClass, msg string, ret error) error {
	if err := w.complete(ctx, spec, graph, GraphStatus{Status: GraphFailed, Class: string(class), Message: msg, Worker: w.cfg.Name}, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ret, asynq.SkipRetry)
}

// complete records a graph's final status; whoever completes the last
// graph enqueues finalize (its task ID makes a second enqueue a no-op).
// The attempt that completes it also writes res (if any) as the graph's
// result.json at once, as workers did before attempt keys: so a finalize
// run by a worker of that older version still finds it, and readers need
// not wait for finalize. Finalize publishes the same result again.
func (w *Worker) complete(ctx context.Context, spec *RunSpec, graph string, st GraphStatus, res *tuner.Result) error {
	first, remaining, err := w.runs.CompleteGraph(ctx, spec.Run, graph, st)
	if err != nil {
		return err
	}
	if first && res != nil {
		if err := artifacts.PutJSON(ctx, w.cfg.Store, artifacts.GraphResultKey(spec.Run, graph), res); err != nil {
			return fmt.Errorf("publish graph %s result: %w", graph, err)
		}
	}
	if remaining == 0 {
		return enqueueFinalize(ctx, w.q, spec.Run, spec.Target)
	}
	return nil
}

// materialize downloads the bundle files one graph needs (verified against
// their digests) and writes a bundle.json with that graph only.
func materialize(ctx context.Context, store artifacts.Store, spec *RunSpec, graph, dir string) (*bundle.Bundle, error) {
	g, ok := spec.Manifest.Graph(graph)
	if !ok {
		return nil, fmt.Errorf("run %s has no graph %q: %w", spec.Run, graph, asynq.SkipRetry)
	}
	m := spec.Manifest
	m.Graphs = []bundle.Graph{g}
	m.DynamicShapes = graphDynamicShapes(spec.Manifest, g)
	if len(m.DynamicShapes) == 0 {
		m.DynamicShapes = nil
	}
	for _, rel := range g.Paths() {
		ref, ok := spec.Files[rel]
		if !ok {
			return nil, fmt.Errorf("run %s: run.json lists no blob for %s: %w", spec.Run, rel, asynq.SkipRetry)
		}
		// Paths came from a validated bundle; check again, since run.json
		// is read back from shared storage.
		if err := artifacts.CheckKey(rel); err != nil {
			return nil, fmt.Errorf("run %s: %w: %w", spec.Run, err, asynq.SkipRetry)
		}
		dest := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		if err := artifacts.FetchFile(ctx, store, ref, dest); err != nil {
			return nil, err
		}
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), data, 0o644); err != nil {
		return nil, err
	}
	b, err := bundle.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("run %s graph %s: %w: %w", spec.Run, graph, err, asynq.SkipRetry)
	}
	return b, nil
}

// quietLogger passes asynq's warnings and errors to the worker's log.
type quietLogger struct{ w io.Writer }

func (l quietLogger) Debug(args ...any) {}
func (l quietLogger) Info(args ...any)  {}
func (l quietLogger) Warn(args ...any) {
	fmt.Fprintln(l.w, append([]any{"asynq warning:"}, args...)...)
}
func (l quietLogger) Error(args ...any) { fmt.Fprintln(l.w, append([]any{"asynq error:"}, args...)...) }
func (l quietLogger) Fatal(args ...any) { fmt.Fprintln(l.w, append([]any{"asynq fatal:"}, args...)...) }
