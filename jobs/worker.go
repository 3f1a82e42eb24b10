package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
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
	// WorkDir holds per-task scratch directories (a graph's downloaded
	// files, the engines built, build logs) and finalize's AITune
	// checkpoint staging; default os.TempDir(). In a pod it is the big
	// volume, not /tmp, which is sized for small temporary files.
	WorkDir string
	// Signer, when set, signs each done run's provenance at finalize
	// (runs/<run>/attestation.intoto.jsonl).
	Signer *provenance.Signer
	// Name identifies the worker in results (default hostname:pid).
	Name string
	// Logger receives the worker's records: one info line per task start
	// and end (run, graph, queue, winner or failure class, duration);
	// warnings an operator must see whatever the verbosity (one per failed
	// attempt with its class and error, give-ups, quarantines, the
	// reconciler's repairs); and, at debug level, one line per task step.
	// Nil means a logger over Log and Warn.
	Logger *slog.Logger
	// Log receives one line per task step, when Logger is nil; nil
	// discards.
	Log io.Writer
	// Warn receives, when Logger is nil, the task lines and what an
	// operator must see. Nil means Log.
	Warn io.Writer
	// Observer hears tasks, phases, slots and transfers, for metrics (see
	// package metrics). Nil means NopObserver.
	Observer Observer
	// RetryBudget is how long a graph's (or a finalize's) retryable
	// failures may go on before it gives up: retries are budgeted by time,
	// not by count, so that an outage of minutes (S3 down, a full disk)
	// costs attempts, not graphs. Default 30 minutes.
	RetryBudget time.Duration
	// MaxDeaths is how many attempts at a graph may die with their worker
	// while tuning (SIGKILL, out of memory) before the graph is quarantined:
	// recorded as failed instead of taking the next worker down. Default 3.
	MaxDeaths int
	// ReconcileEvery is how often the worker that holds the reconciler's
	// Redis lock looks for runs that cannot finish by themselves (see
	// Reconciler). Default 30 s; negative disables it.
	ReconcileEvery time.Duration
	// CancelPoll is how often a tuning attempt checks whether its run was
	// cancelled. Default 2 s.
	CancelPoll time.Duration
	// Retention is how long a finished run's bookkeeping stays in Redis
	// (Runs.Retention; default 30 days, negative: forever).
	Retention time.Duration
	// Fingerprint is the machine: its platform keys bind runs, index
	// results and pin tasks to GPUs. Zero means a CPU machine named by
	// gpu.DetectDefault's CPU fingerprint (the caller normally passes it).
	Fingerprint gpu.Fingerprint
	// MaxHandBacks bounds how often a graph's task may be handed back
	// because it belongs to another platform (every 5 s: five RetryUnits):
	// past it the graph fails, naming the platform no worker served.
	// Default 720 (about an hour).
	MaxHandBacks int
	// PollInterval is how often a worker with a free slot polls for work
	// (asynq polls; it does not block, and sleeps 0.5 to 1.5 intervals
	// after an empty poll). Default 25ms: a run's first task waits for an
	// idle worker's next poll, on average about half an interval, which
	// on a run of a few small graphs was most of the queue's cost over
	// tuning directly (48 ms measured at 100ms, against eight tasks of
	// about 60 ms on a quiet machine); asynq's 1 s default would add up
	// to a second to every hand-over (worker run --poll-interval). A poll
	// reaches Redis only as IdlePoll allows.
	PollInterval time.Duration
	// IdlePoll is the longest wait between two asks of a queue that keeps
	// answering empty: each empty answer doubles the wait from
	// PollInterval up to IdlePoll, and a claim, a task's end or a wake
	// (WakeChannel, sent by every enqueue of a task that can run now)
	// ends it. Default DefaultIdlePoll (1 s): an idle worker costs Redis
	// one poll a second per queue instead of forty, and still takes a
	// new run's first task within a poll interval of its enqueue. At most
	// PollInterval: every poll asks Redis (worker run --idle-poll).
	IdlePoll time.Duration
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
	// Heartbeat is how often the worker registers its platforms for its
	// queues (RegisterPlatforms), which the nightly producer reads.
	// Default DefaultHeartbeat; negative disables.
	Heartbeat time.Duration
	// RetryUnit scales the delays before a task is retried (see
	// retryDelay): a dead worker's task after one unit, a task handed
	// back to another platform after five, a busy slot after two, other
	// failures from one unit doubling up to sixty; and it is how often
	// retried tasks whose delay is over go back to their queue (asynq's
	// DelayedTaskCheckInterval, 5 s at asynq's default, a unit capped at
	// 5 s here). Default DefaultRetryUnit (1 s), which production keeps:
	// the delays pace real outages and hand-overs. Tests set a few
	// milliseconds so that a retry does not wait out seconds of delay and
	// of forwarding interval; the retry logic they exercise is the same.
	RetryUnit time.Duration
}

// Defaults of WorkerConfig.
const (
	DefaultRetryBudget  = 30 * time.Minute
	DefaultMaxDeaths    = 3
	DefaultPollInterval = 25 * time.Millisecond
	DefaultIdlePoll     = time.Second
	DefaultRetryUnit    = time.Second
)

// Worker serves tune:graph and tune:finalize tasks.
type Worker struct {
	// flights are the tasks whose handlers run, for Wedged.
	flights inFlight
	// gate holds prefetches back while another worker may be idle and
	// quiets the polls of queues that answer empty; gated is the asynq
	// server's own Redis client that carries it (both nil for a client
	// kind the gate cannot copy). stopWake ends the wake listener.
	gate     *claimGate
	gated    redis.UniversalClient
	stopWake context.CancelFunc
	wakeDone chan struct{}
	rec      *Reconciler
	specs    *specCache // run.json of the runs this worker serves
	insp     *asynq.Inspector
	stopRec  context.CancelFunc
	recDone  chan struct{}
	stopHB   context.CancelFunc
	hbDone   chan struct{}
	id       string // in the registry of task slots: host, process and a random suffix
	cfg      WorkerConfig
	runs     *runstate.Runs
	q        *queueClient
	srv      *asynq.Server
	slots    *slotPool // one per GPU (or one CPU slot per concurrent task)
	all      []slot
	// platform is the platform of every slot when they share one (every CPU
	// worker, a machine of identical GPUs), "" when they differ.
	platform string
}

// withDefaults fills in what the configuration leaves zero.
func (cfg WorkerConfig) withDefaults() WorkerConfig {
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
	if cfg.Warn == nil {
		cfg.Warn = cfg.Log
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(newLineHandler(cfg.Log, cfg.Warn))
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.RetryBudget == 0 {
		cfg.RetryBudget = DefaultRetryBudget
	}
	if cfg.MaxDeaths == 0 {
		cfg.MaxDeaths = DefaultMaxDeaths
	}
	if cfg.ReconcileEvery == 0 {
		cfg.ReconcileEvery = 30 * time.Second
	}
	if cfg.CancelPoll == 0 {
		cfg.CancelPoll = 2 * time.Second
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.IdlePoll == 0 {
		cfg.IdlePoll = DefaultIdlePoll
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.RetryUnit <= 0 {
		cfg.RetryUnit = DefaultRetryUnit
	}
	if cfg.MaxHandBacks == 0 {
		cfg.MaxHandBacks = 720
	}
	if cfg.Fingerprint.Kind == "" {
		cfg.Fingerprint = gpu.Fingerprint{Kind: gpu.KindCPU}
	}
	return cfg
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
	cfg = cfg.withDefaults()
	queues := map[string]int{}
	for _, q := range cfg.Queues {
		queues[Queue(q)] = 1
	}
	w := &Worker{cfg: cfg, runs: runstate.NewRuns(cfg.Redis), q: newQueueClient(cfg.Redis)}
	if n, err := removeStaleScratch(cfg.WorkDir); err != nil {
		w.warnf("removing scratch directories of workers that are gone from %s: %v", cfg.WorkDir, err)
	} else if n > 0 {
		w.logf("removed %d scratch director(ies) of workers that are gone from %s", n, cfg.WorkDir)
	}
	w.runs.Retention = cfg.Retention
	w.rec = NewReconciler(cfg.Redis, cfg.Store, LogWriter(cfg.Logger, slog.LevelWarn))
	w.rec.runs.Retention = cfg.Retention
	w.specs = newSpecCache(cfg.Store, 64)
	w.insp = asynq.NewInspectorFromRedisClient(cfg.Redis)
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
	kind, total := string(fp.Kind), len(slots)
	w.slots.observe = func(busy int) { w.cfg.Observer.Slots(kind, busy, total) }
	w.cfg.Observer.Slots(kind, 0, total)
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
	w.id = fmt.Sprintf("%s/%d/%s", hostname(), os.Getpid(), strconv.FormatUint(rand.Uint64(), 36))
	srvRedis := cfg.Redis
	// A prefetch must not take the night's next task from an idle worker,
	// and an idle worker must not ask Redis 40 times a second (claimGate).
	gate := newClaimGate(len(slots), 2*cfg.PollInterval, cfg.PollInterval, cfg.IdlePoll)
	if c := gatedClient(cfg.Redis, gate); c != nil {
		w.gate, w.gated, srvRedis = gate, c, c
	}
	w.srv = asynq.NewServerFromRedisClient(srvRedis, asynq.Config{
		// Slots plus prefetched tasks; finalize tasks need no slot and run
		// in the same count.
		Concurrency:       cfg.Concurrency + cfg.Prefetch,
		Queues:            queues,
		ShutdownTimeout:   cfg.ShutdownTimeout,
		TaskCheckInterval: cfg.PollInterval,
		RetryDelayFunc: func(n int, err error, _ *asynq.Task) time.Duration {
			return retryDelay(cfg.RetryUnit, n, err)
		},
		// asynq's 5 s at the default unit: a retried task waits its delay
		// and then up to one interval for the forwarder.
		DelayedTaskCheckInterval: min(5*cfg.RetryUnit, 5*time.Second),
		// Handing a task to the right platform is not a failure: it must
		// not use up the task's retries.
		IsFailure:    isFailure,
		ErrorHandler: asynq.ErrorHandlerFunc(w.onTaskError),
		LogLevel:     asynq.WarnLevel,
		Logger:       quietLogger{l: cfg.Logger},
	})
	return w, nil
}

// retryDelay retries a task whose worker died (lease expired) almost at
// once: the work was not wrong, the worker was gone. Other retryable
// failures back off exponentially from 1 s, capped at a minute with some
// jitter: retries are budgeted by time (RetryBudget), and asynq's default
// (n⁴ seconds) would leave hours between the late ones. The seconds are
// units of WorkerConfig.RetryUnit (1 s but in tests).
func retryDelay(unit time.Duration, n int, err error) time.Duration {
	if errors.Is(err, asynq.ErrLeaseExpired) {
		return unit
	}
	if errors.Is(err, gpu.ErrWrongPlatform) {
		return 5 * unit // let a worker of the run's platform take it
	}
	if errors.Is(err, errSlotsBusy) {
		return 2 * unit // a slot of its platform, here or elsewhere, frees up
	}
	d := 60 * unit
	if n < 6 {
		d = unit << n
	}
	return d + time.Duration(rand.Int64N(int64(d/5)+1))
}

// Mux routes the task types to the worker's handlers.
func (w *Worker) Mux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(w.flights.track)
	if g := w.gate; g != nil {
		mux.Use(func(h asynq.Handler) asynq.Handler {
			return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
				defer g.ended()
				return h.ProcessTask(ctx, t)
			})
		})
	}
	mux.HandleFunc(TypeGraph, w.ProcessGraph)
	mux.HandleFunc(TypeFinalize, w.ProcessFinalize)
	return mux
}

// Start serves tasks in the background, and runs the reconciler whenever
// this worker holds its lock.
func (w *Worker) Start() error {
	if err := w.srv.Start(w.Mux()); err != nil {
		return err
	}
	if w.gate != nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.stopWake, w.wakeDone = cancel, make(chan struct{})
		go func() {
			defer close(w.wakeDone)
			listenForWakes(ctx, w.cfg.Redis, w.gate.wake)
		}()
	}
	if w.cfg.Heartbeat > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		w.stopHB, w.hbDone = cancel, make(chan struct{})
		// The first registration is done before Start returns: a nightly
		// submitted right after sees this worker.
		if err := w.register(ctx, w.platforms()); err != nil {
			w.warnf("%v", err)
		}
		go func() {
			defer close(w.hbDone)
			w.heartbeat(ctx)
		}()
	}
	if w.cfg.ReconcileEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		w.stopRec, w.recDone = cancel, make(chan struct{})
		go func() {
			defer close(w.recDone)
			w.rec.Loop(ctx, w.cfg.ReconcileEvery)
		}()
	}
	return nil
}

// Shutdown stops taking tasks, waits up to ShutdownTimeout for running ones
// and hands the rest back to the queue.
func (w *Worker) Shutdown() {
	if w.stopHB != nil {
		w.stopHB()
		<-w.hbDone
		// Its slots no longer count for a nightly's expected finish. A
		// Redis that is gone does not hold the shutdown up: the entry
		// then ages out of the readers' window.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		runstate.UnregisterSlots(ctx, w.cfg.Redis, w.id, w.cfg.Queues, len(w.all))
		cancel()
	}
	if w.stopRec != nil {
		w.stopRec()
		<-w.recDone
	}
	w.srv.Shutdown()
	if w.stopWake != nil {
		w.stopWake()
		<-w.wakeDone
	}
	if w.gated != nil {
		w.gated.Close()
	}
	w.q.Close()
}

// StopTaking stops taking new tasks; running ones finish (asynq's Stop).
func (w *Worker) StopTaking() { w.srv.Stop() }

// Ping checks the worker's Redis connection (for readiness: an outage
// makes the worker unready, not dead; see Wedged).
func (w *Worker) Ping() error { return w.srv.Ping() }
