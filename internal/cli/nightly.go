package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"

	"github.com/tunefleet/tunefleet/internal/webhook"
)

func newFleet(svc *services) *cobra.Command {
	c := &cobra.Command{Use: "fleet", Short: "Check fleet files (the models nightly tunes)", Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErr(fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath()))
		}}
	var ortLib string
	validate := &cobra.Command{
		Use:   "validate FLEET.yaml",
		Short: "Check a fleet file: its keys, settings and bundles",
		Long: "Check a fleet file without submitting anything: unknown keys (by line), duplicate models, targets,\n" +
			"strategies, candidates and tolerances, and that every bundle opens and is the model it is listed as.\n" +
			"Whether a worker serves each target class is checked by producer nightly (it needs --redis).",
		Example: "  producer fleet validate fleet.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, es, err := loadFleet(args[0], ortLib)
			if err != nil {
				return err
			}
			sb, closeStore, err := storedBundles(cmd.Context(), svc, es)
			if err != nil {
				return err
			}
			defer closeStore()
			if err := f.CheckBundles(cmd.Context(), sb, es); err != nil {
				var fe *fleet.Error
				if errors.As(err, &fe) {
					return usageErr(err)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok, %d model(s), %d model x target entries (digest %s)\n", args[0], len(f.Models), len(es), f.Digest)
			return nil
		},
	}
	validate.Flags().StringVar(&ortLib, "ort-lib", "", "ONNX Runtime library, to check ort: candidates (default as producer submit)")
	c.AddCommand(validate)
	return c
}

// loadFleet reads and checks a fleet file; its errors are the user's.
func loadFleet(path, ortLib string) (*fleet.File, []fleet.Entry, error) {
	f, err := fleet.Load(path)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	es, err := f.Entries()
	if err == nil {
		err = f.CheckBackends(es, Backends(ortLib))
	}
	if err != nil {
		return nil, nil, usageErr(err)
	}
	return f, es, nil
}

type nightlyFlags struct {
	fleet       string
	date        string
	wait        bool
	waitTimeout time.Duration
	notify      string
	schedule    string
	window      time.Duration
	format      string
	ortLib      string
	retryFailed bool
	uiURL       string
	workers     []string
	deadline    string
	estDefault  time.Duration
	digestCache string
}

func newNightly(svc *services) *cobra.Command {
	var f nightlyFlags
	cmd := &cobra.Command{
		Use:   "nightly --fleet FLEET.yaml",
		Short: "Submit every model x target of a fleet once for the night",
		Long: "Submit every enabled model of the fleet file on each of its target classes, once per night: the\n" +
			"nightly id is the date and the fleet file's digest, so running it twice, or from two replicas, submits\n" +
			"nothing new. Unchanged work is skipped before it is enqueued: a graph whose result is in the result\n" +
			"index for every platform that served its class recently (workers register with a heartbeat) is not\n" +
			"queued, and a model whose every graph is unchanged has its state re-published with no task at all.\n" +
			"Every graph's tuning time is estimated from the model's history on the class (same candidates; new work:\n" +
			"the class's median; a class with no history at all: a guess from the bundle, labelled a guess, or\n" +
			"--estimate-default) and a class's graphs are enqueued longest first (fleet\n" +
			"priority still first); with the workers registered, or --workers CLASS=N, the plan expects a finish time,\n" +
			"and --deadline warns (stderr and --notify's webhook) when it will not fit, naming the classes short.\n" +
			"The plan is written to nightly/<nightly-id>/plan.json in --store. --wait follows every run to its\n" +
			"end and writes the morning report; --schedule runs as a long-lived process, a nightly per cron tick.\n" +
			"With --sign-key (or $TUNEFLEET_SIGN_KEY), the runs this producer finalizes itself (every graph reused) are signed\n" +
			"at finalize and, since workers finalize the rest, --wait is required: each run of the night a worker finalized\n" +
			"without the key is signed once it ends done (its provenance, its layouts, its latest pointers). Without --wait,\n" +
			"or with --schedule, a key is refused (exit 2): give the workers the key instead.",
		Example: "  producer nightly --fleet fleet.yaml --redis redis://127.0.0.1:6379/0 --store s3://tuning?endpoint=http://127.0.0.1:9000 --wait",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runNightly(cmd, svc, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.fleet, "fleet", "", "the fleet file (required)")
	fl.StringVar(&f.date, "date", "", "the night, YYYY-MM-DD (default: today, UTC)")
	fl.BoolVar(&f.wait, "wait", false, "follow every run to its end, then write the morning report; exit 1 if one failed; with --sign-key, sign each run a worker finalized without the key")
	fl.DurationVar(&f.waitTimeout, "wait-timeout", 0, "with --wait, give up following after this long (exit 1; the runs go on); 0: no limit")
	fl.StringVar(&f.notify, "notify", "", "webhook URL (Slack-compatible) of the morning report, recorded in the plan")
	fl.StringVar(&f.schedule, "schedule", "", `run as a long-lived process: a nightly at every tick of this cron spec, e.g. "0 2 * * *" (UTC)`)
	fl.DurationVar(&f.window, "platform-window", fleet.DefaultWindow, "a platform counts as serving a class if a worker of it was seen this recently")
	fl.StringVarP(&f.format, "output", "o", "text", "output format: text or json (the plan)")
	fl.StringVar(&f.ortLib, "ort-lib", "", "ONNX Runtime library, to check ort: candidates (default as producer submit)")
	fl.StringVar(&f.digestCache, "digest-cache", defaultDigestCache(), `file that keeps the digests of bundle directories' files from one run to the next: a file unchanged since (device, inode, size, times) is not read again; "" keeps none (default $`+DigestCacheEnv+`, else tunefleet/digests.json in $XDG_CACHE_HOME or ~/.cache)`)
	cmd.AddCommand(newNightlyReport(svc), newNightlyList(svc), newNightlyShow(svc))
	fl.StringVar(&f.uiURL, "ui-url", "", "with --wait: the web UI's URL (producer serve) that report.html links its runs, models and nightly to")
	fl.StringArrayVar(&f.workers, "workers", nil, "assume N workers (task slots) serve CLASS for the expected finish, in place of those registered (scale-from-zero): CLASS=N, repeatable")
	fl.StringVar(&f.deadline, "deadline", "", `warn when the night is expected to end after this: a clock time ("06:00", local; "06:00 Europe/Paris", "06:00+01:00") or RFC 3339`)
	fl.DurationVar(&f.estDefault, "estimate-default", 0, "a graph's expected tuning time when its class has no history at all (0: guessed from its bundle: candidates, batch sizes, bench time, graph size); either way the finish is shown as a guess")
	fl.BoolVar(&f.retryFailed, "retry-failed", false, "build again the candidates that failed deterministically on the same work, platform and toolchain before (the negative cache skips them)")
	return cmd
}

func runNightly(cmd *cobra.Command, svc *services, f nightlyFlags) error {
	ctx := cmd.Context()
	if f.fleet == "" {
		return usageErr(errors.New("--fleet is required: the fleet file to submit"))
	}
	if !okFormat(&f.format, "text") {
		return usageErr(fmt.Errorf("-o %q: want text or json", f.format))
	}
	if f.waitTimeout < 0 || f.window <= 0 || f.estDefault < 0 {
		return usageErr(errors.New("--wait-timeout and --estimate-default must be 0 or positive, --platform-window positive"))
	}
	if _, err := nightplan.ParseWorkers(f.workers); err != nil {
		return usageErr(err)
	}
	if f.deadline != "" {
		if _, err := nightplan.ParseDeadline(f.deadline, time.Now(), time.Local); err != nil {
			return usageErr(err)
		}
	}
	if f.notify != "" {
		if err := report.CheckURL(f.notify); err != nil {
			return usageErr(fmt.Errorf("--notify: %w", err))
		}
	}
	var date time.Time
	if f.date != "" {
		if f.schedule != "" {
			return usageErr(errors.New("--date and --schedule exclude each other: a schedule submits each night as it comes"))
		}
		d, err := fleet.ParseDate(f.date)
		if err != nil {
			return usageErr(err)
		}
		date = d
	}
	// Workers finalize a night's runs: a key given here signs those it
	// finalizes itself (full reuse) and, with --wait, every other run of
	// the night once it ends. Without --wait it would be silently ignored
	// for the rest.
	if !f.wait && (svc.signKey != "" || os.Getenv(SignKeyEnv) != "") {
		return usageErr(fmt.Errorf("a signing key (--sign-key or $%s) with nightly needs --wait: the workers finalize the night's runs, and this producer signs those they left unsigned when the runs end (a --schedule follows no night to its end); or give the workers the key instead (worker run --sign-key, or $%s from a Secret: docs/deploy-tooling.md)", SignKeyEnv, SignKeyEnv))
	}
	var sched fleet.Schedule
	if f.schedule != "" {
		if f.wait {
			return usageErr(errors.New("--wait and --schedule exclude each other: a schedule follows no single night"))
		}
		s, err := fleet.ParseSchedule(f.schedule)
		if err != nil {
			return usageErr(err)
		}
		sched = s
	}
	if _, err := uiLinks(f.uiURL); err != nil {
		return err
	}
	// The fleet file is checked before a service is reached.
	if _, _, err := loadFleet(f.fleet, f.ortLib); err != nil {
		return err
	}
	if err := needRedis(svc, "nightly"); err != nil {
		return err
	}
	rdb, err := svc.openRedis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	store, err := svc.openStore(ctx)
	if err != nil {
		return err
	}
	signer, err := svc.signer()
	if err != nil {
		return err
	}
	client := jobs.NewClient(rdb, store)
	client.SetSigner(signer)
	defer client.Close()
	sub := &fleet.Submitter{
		Redis: rdb, Store: store, Client: client, Backends: Backends(f.ortLib), Window: f.window,
		Command: redactArgs(append([]string{"producer"}, os.Args[1:]...)), Log: followOut(cmd, f.format),
		StoreURL: svc.store, Declared: declaredClasses(),
		// A schedule opens the fleet's bundles every night in this one
		// process: those that did not change are not read again.
		Bundles: &bundle.Memo{},
		Workers: func(ctx context.Context, classes []string) (map[string]int, error) {
			return fleet.RegisteredWorkers(ctx, rdb, classes, time.Now())
		},
	}
	// The digests of the bundles' files, kept from the last run: a
	// nightly run from cron hashed every file of every bundle directory
	// again, weights and all, to learn that nothing changed. A cache it
	// cannot read or write costs only that: a warning, never the night.
	if f.digestCache != "" {
		if _, err := bundle.LoadDigests(f.digestCache); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "nightly: %v; every bundle file is read\n", err)
		}
	}
	night := func(ctx context.Context, date time.Time) error {
		err := nightlyOnce(ctx, cmd, sub, rdb, store, svc.storeName(), f, date)
		if f.digestCache != "" {
			if _, serr := bundle.SaveDigests(f.digestCache); serr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "nightly: %v (the next run reads every bundle file again)\n", serr)
			}
		}
		return err
	}
	if sched != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "nightly: scheduled %q (UTC), fleet %s\n", f.schedule, f.fleet)
		return fleet.RunSchedule(ctx, rdb, sched, func(ctx context.Context, at time.Time) {
			if err := night(ctx, at); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "nightly of %s: %v\n", at.UTC().Format(time.DateOnly), err)
			}
		})
	}
	return night(ctx, date)
}

// nightlyOnce submits one night (re-reading the fleet file: a schedule
// picks up its edits), prints the plan and, with --wait, follows it.
func nightlyOnce(ctx context.Context, cmd *cobra.Command, sub *fleet.Submitter, rdb redis.UniversalClient, store artifacts.Store, storeName string, f nightlyFlags, date time.Time) error {
	file, _, err := loadFleet(f.fleet, f.ortLib)
	if err != nil {
		return err
	}
	workers, _ := nightplan.ParseWorkers(f.workers) // checked before
	opts := fleet.Options{Date: date, Notify: f.notify, RetryFailed: f.retryFailed, Workers: workers, DefaultSeconds: f.estDefault.Seconds()}
	if f.deadline != "" {
		// A clock time is its next occurrence: each scheduled night's own.
		if opts.Deadline, err = nightplan.ParseDeadline(f.deadline, time.Now(), time.Local); err != nil {
			return usageErr(err)
		}
	}
	plan, existed, err := sub.Submit(ctx, file, opts)
	var fe *fleet.Error
	if errors.As(err, &fe) {
		return usageErr(err)
	}
	if err != nil {
		return err
	}
	printPlan(cmd.OutOrStdout(), plan, existed, f.format)
	// Progress and warnings: stderr for the human form, with -o json only
	// on a terminal (a script merging stderr reads only JSON; the plan
	// holds the estimate), never with -q.
	progress := followOut(cmd, f.format)
	if line := fleet.EstimateLine(plan); line != "" {
		fmt.Fprintf(progress, "nightly %s %s\n", plan.Nightly, line)
	}
	if w := fleet.DeadlineWarning(plan); w != "" && !existed {
		// Only the producer that wrote the plan warns: once per night.
		warnNight(ctx, progress, plan.Notify, w, webhook.Policy{})
	}
	if plan.Failed() > 0 && !f.wait {
		return failedErr(fmt.Errorf("nightly %s: %d entr(ies) failed to submit (see the plan)", plan.Nightly, plan.Failed()))
	}
	if !f.wait {
		return nil
	}
	wctx := ctx
	if f.waitTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, f.waitTimeout)
		defer cancel()
	}
	runs := runstate.NewRuns(rdb)
	if existed { // a new plan's submit said already what its classes wait for
		for _, line := range waitingLines(ctx, rdb, planRuns(ctx, runs, plan)) {
			fmt.Fprintf(progress, "nightly %s: %s\n", plan.Nightly, line)
		}
	}
	links, _ := uiLinks(f.uiURL) // checked before anything was submitted
	// With -o json, stdout holds the plan alone (one JSON document a
	// script can parse); the morning report's lines go with the rest of
	// the progress (stderr on a terminal, else nowhere: summary.json and
	// report.html have them).
	reportOut := cmd.OutOrStdout()
	if f.format == "json" {
		reportOut = progress
	}
	morning := morningReport{store: store, rdb: rdb, notify: plan.Notify, policy: webhook.Policy{For: defaultRetryFor()}, storeName: storeName, out: reportOut, links: links}
	final, err := fleet.Wait(wctx, runs, plan, time.Second, newDeadlineWatch(morning, progress))
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		// --wait-timeout: say where each run is, and what it waits for.
		for _, st := range planRuns(ctx, runs, plan) {
			if st.Final() {
				continue
			}
			line := fmt.Sprintf("nightly %s: run %s (model %s, target %s): still %s (%d/%d graph(s) finished)",
				plan.Nightly, st.Run, st.Model, st.Target, st.Status, st.Done+st.Failed+st.Cancelled, st.Total)
			if w := waitingFor(ctx, rdb, st.Target); w != nil {
				line += "; " + w.Message
			}
			fmt.Fprintln(cmd.ErrOrStderr(), line)
		}
		return failedErr(fmt.Errorf("nightly %s: --wait-timeout %s passed before every run ended; they go on: follow one with `producer status RUN --watch`", plan.Nightly, f.waitTimeout))
	}
	if err != nil {
		return failedErr(err)
	}
	// Runs a worker without the key finalized are signed here (nothing
	// to do without a key, or for a run signed at finalize).
	for _, st := range final {
		if err := signLeftUnsigned(ctx, sub.Client, st, f.format, cmd.ErrOrStderr()); err != nil {
			return fmt.Errorf("nightly %s: %w", plan.Nightly, err)
		}
	}
	bad := plan.Failed()
	for _, st := range final {
		if st.Status != runstate.RunDone {
			bad++
		}
	}
	if bad > 0 {
		return failedErr(fmt.Errorf("nightly %s: %d model x target(s) did not end done", plan.Nightly, bad))
	}
	fmt.Fprintf(progress, "nightly %s: every run done; %s\n", plan.Nightly, finishLine(plan, time.Now()))
	return nil
}

// finishLine is the plan's expected finish next to the actual one (when
// --wait saw the last run final).
func finishLine(p *state.Plan, actual time.Time) string {
	est := p.Estimate
	if est == nil {
		return "no estimate in the plan"
	}
	return report.NewFinish(est, &actual).Line()
}

func printPlan(w io.Writer, p *state.Plan, existed bool, format string) {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(p)
		return
	}
	counts := map[string]int{}
	for _, e := range p.Entries {
		counts[e.Outcome]++
	}
	how := "submitted"
	if existed {
		how = "was submitted before; nothing new"
	}
	fmt.Fprintf(w, "nightly %s %s: %d submitted, %d unchanged, %d failed; plan %s\n", p.Nightly, how,
		counts[state.OutcomeSubmitted], counts[state.OutcomeUnchanged], counts[state.OutcomeFailed], state.PlanKey(p.Nightly))
}

// planRuns are the runs of the plan's entries as Redis has them now (an
// entry with no run, or a run Redis cannot give, is left out).
func planRuns(ctx context.Context, runs *runstate.Runs, plan *state.Plan) []runstate.RunStatus {
	var out []runstate.RunStatus
	for _, e := range plan.Entries {
		if e.Run == "" {
			continue
		}
		if st, err := runs.Get(ctx, e.Run); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// DigestCacheEnv overrides where a nightly keeps its files' digests
// ("" keeps none).
const DigestCacheEnv = "TUNEFLEET_DIGEST_CACHE"

// defaultDigestCache is where a nightly keeps its files' digests by
// default: $TUNEFLEET_DIGEST_CACHE, else tunefleet/digests.json in the
// user's cache directory ($XDG_CACHE_HOME or ~/.cache), or none where
// there is no such directory.
func defaultDigestCache() string {
	if v, ok := os.LookupEnv(DigestCacheEnv); ok {
		return v
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "tunefleet", "digests.json")
}
