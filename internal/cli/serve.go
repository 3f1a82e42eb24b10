package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/backend/replay"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/metrics"
	"github.com/tunefleet/tunefleet/ort"
)

// runFlags are `worker run`'s flags.
type runFlags struct {
	queues      string
	class       string
	trtexec     string
	concurrency int
	health      string
	ortLib      string
	shutdown    time.Duration
	verbose     bool
	logFormat   string
	keepEngines bool
	prefetch    int
	maxTasks    int
	idleExit    time.Duration
	workDir     string
	liveness    time.Duration
	reliability reliabilityFlags
}

// WorkDirEnv is the default of `worker run --work-dir`.
const WorkDirEnv = "TUNEFLEET_WORK_DIR"

func (f *runFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.queues, "queues", "", "comma-separated queues (target classes) to serve (default: this machine's class, see worker info)")
	fl.StringVar(&f.class, "class", "", "this machine's target class (default: from the GPU name, or cpu)")
	fl.IntVar(&f.concurrency, "concurrency", 1, "tasks run at once on a CPU machine (a GPU machine runs one task per GPU)")
	fl.StringVar(&f.health, "health", "", "serve GET /healthz (liveness), GET /readyz (readiness) and GET /metrics (Prometheus) on this address (e.g. 127.0.0.1:8081)")
	fl.DurationVar(&f.liveness, "liveness-budget", 2*time.Minute, "how long a task may run past its deadline before /healthz answers 503 (wedged: restart me); Redis outages never fail /healthz, only /readyz")
	fl.StringVar(&f.trtexec, "trtexec", "", "trtexec executable for trt: candidates (default: trtexec on PATH)")
	fl.StringVar(&f.ortLib, "ort-lib", "", "ONNX Runtime library (default: $ONNXRUNTIME_SHARED_LIBRARY_PATH or the one make ort fetched)")
	fl.DurationVar(&f.shutdown, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for running tasks before handing them back")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log every task step on stderr (without it: one line per task start and end, and warnings)")
	fl.StringVar(&f.logFormat, "log-format", logText, "log format on stderr: text or json (log/slog's key=value or one JSON object a line)")
	fl.IntVar(&f.prefetch, "prefetch", 1, "tasks taken beyond the slots, to download their inputs while the slots are busy (0: none; at most the number of slots)")
	fl.IntVar(&f.maxTasks, "max-tasks", 0, "exit (status 0) once this many tune tasks have run; with --prefetch 0, a KEDA ScaledJob's one task per pod (0: no limit)")
	fl.DurationVar(&f.idleExit, "idle-exit", 0, "exit (status 0) after this long with no task running, e.g. when another pod took the task this one was started for (0: never)")
	fl.StringVar(&f.workDir, "work-dir", os.Getenv(WorkDirEnv), "where each task's scratch goes (its graph's files, the engines built, build logs): the big volume, not /tmp (default $"+WorkDirEnv+", else the system's temporary directory)")
	f.reliability.register(fl)
	fl.BoolVar(&f.keepEngines, "keep-losing-engines", false, "store the engines of candidates that did not win too (default: only the winner's; every candidate's logs are kept)")
}

// check refuses bad flags before anything is opened (exit 2).
func (f *runFlags) check(svc *services) error {
	if svc.redis == "" {
		return usageErr(fmt.Errorf("worker run needs --redis (or $%s)", RedisEnv))
	}
	for _, q := range splitList(f.queues) {
		if err := jobs.CheckTarget(q); err != nil {
			return usageErr(fmt.Errorf("--queues: %w", err))
		}
	}
	if f.concurrency < 1 {
		return usageErr(fmt.Errorf("--concurrency must be at least 1"))
	}
	if err := f.reliability.check(); err != nil {
		return err
	}
	if f.prefetch < 0 {
		return usageErr(fmt.Errorf("--prefetch must be 0 or more"))
	}
	if f.maxTasks < 0 {
		return usageErr(fmt.Errorf("--max-tasks must be 0 (no limit) or more"))
	}
	if f.idleExit < 0 {
		return usageErr(fmt.Errorf("--idle-exit must be 0 (never) or a positive duration"))
	}
	if f.liveness <= 0 {
		return usageErr(fmt.Errorf("--liveness-budget must be a positive duration"))
	}
	if err := checkWorkDir(f.workDir); err != nil {
		return err
	}
	return checkLogFormat(f.logFormat)
}

func newRun(svc *services) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --queues LIST --concurrency N",
		Short: "Serve tuning tasks from the queue until SIGTERM",
		Long: "Serve tune:graph and tune:finalize tasks from the given queues (target classes) until SIGTERM or SIGINT,\n" +
			"then stop taking tasks, wait up to --shutdown-timeout for running ones and hand the rest back to the queue.\n" +
			"With --health ADDR, GET /healthz (liveness) answers 200 unless a task has run --liveness-budget past its deadline (wedged),\n" +
			"whatever Redis does; GET /readyz (readiness) answers 200 while the worker can reach Redis and its machine works, 503 with the reason otherwise;\n" +
			"and GET /metrics serves the worker's Prometheus series (tunefleet_*; see deploy/grafana/tunefleet.json).\n" +
			"A broken machine (no GPU, driver or CUDA failure seen by a real trtexec run) stops taking tasks, hands running ones back\n" +
			"after --shutdown-timeout and exits with status 3.",
		Example: "  worker run --redis redis://127.0.0.1:6379/0 --store s3://tuning?endpoint=http://127.0.0.1:9000 --queues cpu --concurrency 2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(svc); err != nil {
				return err
			}
			return f.serve(cmd.Context(), svc, cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	svc.registerSignKey(cmd.Flags())
	return cmd
}

// serve opens the machine, the store and Redis, starts the worker and
// serves until a signal (or a broken machine) ends it.
func (f *runFlags) serve(ctx context.Context, svc *services, stderr io.Writer) error {
	// A fleet simulation (backend/replay) replaces every engine build by a
	// replayed duration; only TUNEFLEET_REPLAY turns it on, and a spec
	// that does not parse is refused before anything is opened.
	simulation, simulate, err := replay.Lookup()
	if err != nil {
		return usageErr(err)
	}
	if _, err := ort.FindLibrary(f.ortLib); err != nil {
		return err
	}
	signer, err := svc.signer()
	if err != nil {
		return err
	}
	fp, err := machine(ctx, f.ortLib, f.trtexec, f.class)
	if err != nil {
		return err
	}
	qs := gpu.Queues(fp, splitList(f.queues))
	store, err := svc.openStore(ctx)
	if err != nil {
		return err
	}
	rdb, err := svc.openRedis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()

	var w *jobs.Worker
	var wh *workerHealth
	mw := metrics.NewWorker(qs)
	// --max-tasks and --idle-exit end the command through ctx, as a signal would.
	ctx, finish := context.WithCancel(ctx)
	defer finish()
	lc := newLifecycle(mw, f.maxTasks, f.idleExit, func() { w.StopTaking() }, finish)
	logger := newLogger(stderr, f.logFormat, f.verbose)
	broken := func(err error) {
		// The machine cannot build any more (driver gone, GPU fallen off
		// the bus): stop taking work, turn /readyz to 503, hand running
		// tasks back and exit (serveUntil).
		if wh == nil || !wh.markBroken(err) {
			return
		}
		mw.SetBroken(true)
		logger.Error(fmt.Sprintf("worker: this machine is broken, taking no more tasks; exiting after --shutdown-timeout %s: %v", f.shutdown, err))
		if w != nil {
			go w.StopTaking() // never from inside a task handler's own stack
		}
	}
	prefetch := f.prefetch
	if prefetch == 0 {
		prefetch = -1 // none (WorkerConfig's zero means the default)
	}
	backends := newBackends(backendOptions{ortLib: f.ortLib, trtexec: f.trtexec, platform: fp.PlatformKey(), store: store, onBroken: broken, telemetry: gpuTelemetry(fp, mw)})
	if simulate {
		// The log says so first, so that no one takes such a worker's
		// results for tuning.
		backends = replay.Wrap(backends, simulation)
		logger.Warn(fmt.Sprintf("worker: %s is set: SIMULATED builds (backend/replay), no engine is built: %s", replay.Env, simulation.Spec()))
	}
	cfg := jobs.WorkerConfig{
		Redis: rdb, Store: store, Queues: qs, Concurrency: f.concurrency,
		Backends:        backends,
		ShutdownTimeout: f.shutdown, Fingerprint: fp, KeepLosingEngines: f.keepEngines,
		Prefetch: prefetch, Signer: signer, WorkDir: f.workDir,
		// Task starts and ends, failed attempts, give-ups and repairs are
		// always said; every step with -v.
		Logger: logger, Observer: lc,
	}
	if err := f.reliability.apply(&cfg); err != nil {
		return err
	}
	if w, err = jobs.NewWorker(cfg); err != nil {
		return err
	}
	wh = newWorkerHealth(w, f.liveness)
	wh.metrics = mw.Handler()
	if f.health != "" {
		stop, err := serveHealth(f.health, wh, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := w.Start(); err != nil {
		return err
	}
	lc.start()
	logger.Info(fmt.Sprintf("worker on %s serving queues %s", fp.PlatformKey(), strings.Join(qs, ",")))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	return serveUntil(ctx, sig, wh, w, logger)
}

// checkWorkDir refuses a --work-dir that is not a directory this worker
// can write (exit 2), before anything is opened: a task would otherwise
// fail on its first download, and every task after it.
func checkWorkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return usageErr(fmt.Errorf("--work-dir %s: %w (create it, or mount the scratch volume there)", dir, err))
	}
	if !fi.IsDir() {
		return usageErr(fmt.Errorf("--work-dir %s: not a directory", dir))
	}
	probe, err := os.CreateTemp(dir, ".tunefleet-probe-")
	if err != nil {
		return usageErr(fmt.Errorf("--work-dir %s: not writable by this worker: %w", dir, err))
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// serveHealth serves GET /healthz, /readyz (and /metrics) on addr until stop is
// called.
func serveHealth(addr string, wh *workerHealth, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--health %s: %w", addr, err))
	}
	srv := &http.Server{Handler: wh.handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	logger.Info(fmt.Sprintf("health: http://%s/healthz (liveness), http://%s/readyz (readiness)", ln.Addr(), ln.Addr()))
	if wh.metrics != nil {
		logger.Info(fmt.Sprintf("metrics: http://%s/metrics", ln.Addr()))
	}
	return func() { srv.Close() }, nil
}
