package cli

import (
	"bytes"
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

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/targetclass"
)

type submitFlags struct {
	tuningFlags
	target string
	wait   bool
	force  bool
	// remeasure measures every graph again instead of reusing an indexed
	// result of the same work and settings.
	remeasure bool
	// retryFailed builds candidates the negative cache would skip.
	retryFailed bool
	format      string
	workers     int
	// waitTimeout bounds --wait (0: none).
	waitTimeout time.Duration
	// allowTRTOnCPU lets trt: candidates go to the cpu class.
	allowTRTOnCPU bool
	// check runs each graph's first sample with ONNX Runtime (CPU) before
	// anything is uploaded (graphcheck).
	check bool
	// allowUnserved declares --target for this submit: accepted though no
	// worker ever served it (targetclass).
	allowUnserved bool
}

func newSubmit(svc *services) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit BUNDLE... --target CLASS --strategy NAME --candidates LIST",
		Short: "Upload bundles and enqueue one tuning task per graph spec",
		Long: "Validate and upload each bundle, record its run and enqueue one tune:graph task per graph spec on the\n" +
			"target's queue. Prints the run ids (-o json for scripts). Submitting the same bundle with the same settings\n" +
			"again is the same run and enqueues nothing (--force makes a new run). Graphs whose result is already known\n" +
			"for the same inputs and settings are reused, not rebuilt; another --bench-time or --warmup measures them\n" +
			"again, and --remeasure measures them again with the same settings (the new result supersedes the old).\n\n" +
			"Without --redis the whole pipeline runs in this process (embedded Redis, --workers in-process workers,\n" +
			"artifacts in --store) and submit waits for the runs to finish.",
		Example: "  producer submit mlp-bundle --target cpu --strategy max-throughput --candidates ort:cpu:basic,ort:cpu:all --wait",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd, svc, args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "cpu", "target class, also the queue name (cpu, gpu.h100, …)")
	f.tuningFlags.register(fl)
	fl.BoolVar(&f.wait, "wait", false, "follow the runs to their end; exit non-zero if one failed")
	fl.DurationVar(&f.waitTimeout, "wait-timeout", 0, "with --wait, give up following after this long (exit 1; the runs go on); 0: no limit")
	fl.BoolVar(&f.force, "force", false, "make a new run even if this one was submitted before (graphs whose result is known for the same work and settings are reused; --remeasure measures them again)")
	fl.BoolVar(&f.remeasure, "remeasure", false, "make a new run that measures every graph again, even where a result of the same work and settings is known; the new results supersede the old in the result index")
	fl.BoolVar(&f.retryFailed, "retry-failed", false, "build every candidate again, even those that failed deterministically (build, wrong_answer) on the same work, platform and toolchain before (the negative cache skips them)")
	fl.StringVarP(&f.format, "output", "o", "text", "output format: text (or table) or json")
	fl.IntVar(&f.workers, "workers", 2, "in-process workers when running embedded (no --redis)")
	fl.BoolVar(&f.check, "check", false, "before uploading, run each graph's first recorded sample with ONNX Runtime on the CPU and compare with its reference (producer bundle check --first): a graph that cannot reproduce its recording is refused (exit 2) instead of failing on every worker")
	fl.BoolVar(&f.allowUnserved, "allow-unserved", false, "accept a --target no worker has served yet and "+targetclass.Env+" does not declare (the tasks wait for its first worker)")
	fl.BoolVar(&f.allowTRTOnCPU, allowTRTOnCPUFlag, false, "send trt: candidates to --target cpu too (only if your cpu workers have TensorRT)")
	return cmd
}

func runSubmit(cmd *cobra.Command, svc *services, args []string, f submitFlags) error {
	ctx := cmd.Context()
	opts, err := f.options()
	if err != nil {
		return err
	}
	// With a fleet, workers finalize: a key given here signs only what this
	// producer finalizes or waits for, so without --wait it would be
	// silently ignored.
	if svc.redis != "" && !f.wait && (svc.signKey != "" || os.Getenv(SignKeyEnv) != "") {
		return usageErr(fmt.Errorf("a signing key (--sign-key or $%s) with --redis needs --wait: the workers finalize the runs, and this producer signs those they left unsigned when the runs end; or give the workers the key instead (worker run --sign-key, or $%s from a Secret: docs/deploy-tooling.md)", SignKeyEnv, SignKeyEnv))
	}
	var bundles []*bundle.Bundle
	for _, dir := range args {
		b, cleanup, err := openBundle(dir)
		defer cleanup()
		if err != nil {
			return err
		}
		if err := checkTolerances(b, opts.Tolerances); err != nil {
			return err
		}
		if f.check {
			if err := checkGraphs(cmd, b, dir, f.ortLib); err != nil {
				return err
			}
		}
		bundles = append(bundles, b)
	}
	// Everything that can be checked is checked before the store is opened
	// (a local one is created): a submit that cannot run leaves nothing.
	// The "waiting for a worker" note is for people: -o json keeps stderr
	// for errors (scripts merge it), and status says it again.
	// It is said once the runs are enqueued: a submit that then fails
	// (an unreachable store) prints only its error.
	var note bytes.Buffer
	client, store, closeAll, err := f.connect(ctx, svc, opts, &note)
	if err != nil {
		return err
	}
	defer closeAll()
	subs, err := submitAll(cmd, client, bundles, opts, f.format)
	if err != nil {
		return err
	}
	if f.format == "text" {
		io.Copy(followOut(cmd, f.format), &note)
	}
	var statuses []runstate.RunStatus
	if f.wait || svc.redis == "" { // embedded: the queue lives in this process
		fl := follower{runs: client.Runs(), store: store, out: followOut(cmd, f.format), timeout: f.waitTimeout}
		for _, s := range subs {
			st, err := fl.wait(ctx, s.Run)
			if err != nil {
				return err
			}
			statuses = append(statuses, st)
			if err := signLeftUnsigned(ctx, client, st, f.format, followOut(cmd, f.format)); err != nil {
				return err
			}
		}
	}
	return reportSubmit(cmd, subs, statuses, store, f.format)
}

// checkTolerances says a misspelt --atol/--rtol output before anything is
// uploaded (jobs.Submit applies them to its own copy of the manifest).
func checkTolerances(b *bundle.Bundle, overrides []bundle.ToleranceOverride) error {
	probe := b.Manifest
	probe.Graphs = slices.Clone(probe.Graphs)
	for i := range probe.Graphs {
		probe.Graphs[i].Tolerances = nil // the bundle's own stay untouched
	}
	if err := bundle.ApplyTolerances(&probe, overrides); err != nil {
		return usageErr(fmt.Errorf("bundle %s: %w", b.Dir, err))
	}
	return nil
}

// options checks the flags and turns them into submit options.
func (f *submitFlags) options() (jobs.SubmitOptions, error) {
	if !okFormat(&f.format, "text") {
		return jobs.SubmitOptions{}, usageErr(fmt.Errorf("-o %q: want text or json", f.format))
	}
	if f.workers < 1 {
		return jobs.SubmitOptions{}, usageErr(fmt.Errorf("--workers must be at least 1"))
	}
	if f.waitTimeout < 0 {
		return jobs.SubmitOptions{}, usageErr(fmt.Errorf("--timeout must be 0 (none) or positive"))
	}
	strat, cands, err := f.parse()
	if err != nil {
		return jobs.SubmitOptions{}, err
	}
	if err := checkCandidatesForTarget(f.target, cands, f.allowTRTOnCPU); err != nil {
		return jobs.SubmitOptions{}, usageErr(err)
	}
	tol, err := f.tolerances.parse()
	if err != nil {
		return jobs.SubmitOptions{}, err
	}
	opts := jobs.SubmitOptions{
		Target: f.target, Strategy: strat, Candidates: cands, Backends: Backends(f.ortLib), Force: f.force, Remeasure: f.remeasure,
		BenchTime: f.benchTime, Warmup: f.warmup, CandidateTimeout: f.timeout, Command: redactArgs(append([]string{"producer"}, os.Args[1:]...)),
		Tolerances: tol, RetryFailed: f.retryFailed, FindMaxBatch: f.findMaxBatch, Baseline: f.baseline,
	}
	if err := opts.Validate(); err != nil {
		return opts, usageErr(err)
	}
	return opts, nil
}

// connect gives a client of the fleet's Redis, or of an embedded pipeline
// (no --redis) with in-process workers, and the store.
func (f *submitFlags) connect(ctx context.Context, svc *services, opts jobs.SubmitOptions, errOut io.Writer) (*jobs.Client, artifacts.Store, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*jobs.Client, artifacts.Store, func(), error) {
		closeAll()
		return nil, nil, func() {}, err
	}
	var fp gpu.Fingerprint
	var rdb redis.UniversalClient
	var err error
	if svc.redis == "" {
		if fp, err = f.embeddedMachine(ctx, opts.Candidates); err != nil {
			return fail(err)
		}
	} else {
		if rdb, err = svc.openRedis(ctx); err != nil {
			return fail(err)
		}
		closers = append(closers, func() { rdb.Close() })
		var declared []string
		if f.allowUnserved {
			declared = []string{f.target}
		}
		if err := checkTargetClass(ctx, errOut, rdb, f.target, declared); err != nil {
			return fail(err)
		}
	}
	signer, err := svc.signer()
	if err != nil {
		return fail(err)
	}
	store, err := svc.openStore(ctx)
	if err != nil {
		return fail(err)
	}
	if rdb == nil {
		e, err := jobs.StartEmbedded(jobs.WorkerConfig{
			Store: store, Signer: signer, Backends: newBackends(backendOptions{ortLib: f.ortLib, platform: fp.PlatformKey(), store: store}),
			Queues: []string{f.target}, Concurrency: f.workers, Fingerprint: fp,
		})
		if err != nil {
			return fail(err)
		}
		closers = append(closers, e.Close)
		rdb = e.Redis
	}
	client := jobs.NewClient(rdb, store)
	client.SetSigner(signer)
	closers = append(closers, func() { client.Close() })
	return client, store, closeAll, nil
}

// embeddedMachine is the machine an embedded submit tunes on. Results for
// another class would be filed (and deployed) under a platform they were
// never measured on. Every machine has a CPU: the cpu class is tuned on
// it, GPUs or not.
func (f *submitFlags) embeddedMachine(ctx context.Context, cands []backend.Candidate) (gpu.Fingerprint, error) {
	if _, err := FindORT(cands, f.ortLib); err != nil {
		return gpu.Fingerprint{}, err
	}
	var fp gpu.Fingerprint
	var err error
	if f.target == gpu.ClassCPU {
		fp, err = cpuMachine(ctx, f.ortLib)
	} else {
		fp, err = machine(ctx, f.ortLib, "", "")
	}
	if err != nil {
		return fp, err
	}
	if f.target != fp.Class() {
		return fp, usageErr(fmt.Errorf("--target %s: without --redis, submit tunes on this machine, whose class is %s; give --target %s, or --redis to submit to a fleet that serves %s",
			f.target, fp.Class(), fp.Class(), f.target))
	}
	return fp, nil
}

// submitAll submits each bundle, printing a line per run in text form.
func submitAll(cmd *cobra.Command, client *jobs.Client, bundles []*bundle.Bundle, opts jobs.SubmitOptions, format string) ([]jobs.Submission, error) {
	var subs []jobs.Submission
	for _, b := range bundles {
		ctx, done := withTransferBar(cmd, "upload "+filepath.Base(b.Dir))
		s, err := client.Submit(ctx, b, opts)
		done()
		if errors.Is(err, jobs.ErrRunNotInStore) {
			return subs, usageErr(fmt.Errorf("submit %s: %w", b.Dir, err))
		}
		if err != nil {
			return subs, fmt.Errorf("submit %s: %w", b.Dir, err)
		}
		subs = append(subs, s)
		if format != "text" {
			continue
		}
		note := "submitted"
		switch {
		case s.Created:
		case s.Restored:
			note = "already submitted; Redis had lost it, rebuilt from the store (" + s.Status + ")"
		case s.Status == runstate.RunFailed:
			// The same bundle and settings fail the same way unless the
			// machines were at fault: trying again is the user's call.
			note = "already submitted and failed (--force tunes it again; graphs already done are reused)"
		default:
			note = "already submitted (" + s.Status + "): nothing new enqueued"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s, %d graph(s), %d task(s) enqueued\n", s.Run, note, s.Graphs, s.Enqueued)
	}
	return subs, nil
}

// reportSubmit prints the followed runs (or the submissions, in JSON) and
// fails when a followed run did not succeed.
func reportSubmit(cmd *cobra.Command, subs []jobs.Submission, statuses []runstate.RunStatus, store artifacts.Store, format string) error {
	if format == "json" {
		out := struct {
			Submissions []jobs.Submission    `json:"submissions"`
			Runs        []runstate.RunStatus `json:"runs,omitempty"`
		}{subs, statuses}
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		for _, st := range statuses {
			printRun(cmd.OutOrStdout(), st, store.String())
		}
	}
	var failed []string
	for _, st := range statuses {
		if st.Status != runstate.RunDone {
			failed = append(failed, st.Run+" ("+st.Status+")")
		}
	}
	if len(failed) > 0 {
		return failedErr(fmt.Errorf("run(s) did not succeed: %s", strings.Join(failed, ", ")))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// signLeftUnsigned signs a run that ended done without the signature its
// submitter asked for (a worker without the key finalized it), and says
// so on a terminal's text output.
func signLeftUnsigned(ctx context.Context, client *jobs.Client, st runstate.RunStatus, format string, errOut io.Writer) error {
	if st.Status != runstate.RunDone {
		return nil
	}
	signed, err := client.SignFinished(ctx, st.Run)
	if err != nil {
		return err
	}
	if format == "text" && (signed.Provenance || len(signed.Pointers) > 0) {
		fmt.Fprintf(errOut, "run %s: signed here (its finalize had no signing key): provenance %v, latest pointers %v\n", st.Run, signed.Provenance, signed.Pointers)
	}
	return nil
}
