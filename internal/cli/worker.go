package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// NewWorker returns the worker command tree.
func NewWorker() *cobra.Command {
	root := &cobra.Command{
		Use:   "worker",
		Short: "Build, check, benchmark and select inference engines",
		// worker run hands its tasks back on SIGTERM within
		// --shutdown-timeout: no hard stop cuts that short.
		Annotations: map[string]string{GracefulStop: ""},
	}
	svc := &services{name: "tunefleet-worker"}
	svc.register(root, "worker run needs one")
	(&progressFlags{}).register(root)
	root.AddCommand(newTune(), newRun(svc), newInfo(), newTRTLog(), newHealthcheck(WorkerHealthURL))
	return root
}

// WorkerHealthURL is what `worker healthcheck` probes by default: the
// /healthz that `worker run --health :8081` serves, as the images run it.
const WorkerHealthURL = "http://127.0.0.1:8081/healthz"

// FindORT checks, when any candidate is an ort one, that the ONNX Runtime
// library is there: a machine without it would fail every such candidate
// the same way, so it is said once, before any work, as a machine problem.
func FindORT(cands []backend.Candidate, lib string) (string, error) {
	for _, c := range cands {
		if c.Backend == "ort" {
			return ort.FindLibrary(lib)
		}
	}
	return "", nil
}

type tuneFlags struct {
	tuningFlags
	out    string
	graphs []string
	format string
}

func newTune() *cobra.Command {
	var f tuneFlags
	cmd := &cobra.Command{
		Use:   "tune BUNDLE --candidates LIST --strategy NAME --out DIR",
		Short: "Tune every graph of a bundle on this machine, with no queue or services",
		Long: "Tune every graph spec of a bundle locally: build an engine per candidate, check its outputs against\n" +
			"the reference outputs, benchmark it, and pick a winner by strategy. Writes DIR/graphs/<graph>/result.json\n" +
			"and the engines, prints a table, and exits 0 only when every graph has a winner (1 otherwise, 2 for bad input).\n\n" +
			"Strategies: " + strings.Join(strategy.Names(), ", ") + " (latency-budget needs --latency-budget MS).\n" +
			"Candidates: ort:cpu:<disabled|basic|extended|all>[:threads=N][:inter=N][:spin=on].",
		Example: "  worker tune mlp-bundle --candidates ort:cpu:basic,ort:cpu:extended --strategy max-throughput --out result",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTune(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	f.tuningFlags.register(fl)
	fl.StringVar(&f.out, "out", "", "directory for results and engines (required)")
	fl.StringArrayVar(&f.graphs, "graph", nil, "tune only this graph (repeatable; default: all)")
	fl.StringVarP(&f.format, "output", "o", "table", "output format: table (or text) or json")
	return cmd
}

func runTune(cmd *cobra.Command, dir string, f tuneFlags) error {
	opts, tol, err := f.options(cmd)
	if err != nil {
		return err
	}
	b, cleanup, err := openBundle(dir)
	defer cleanup()
	if err != nil {
		return err
	}
	if err := bundle.ApplyTolerances(&b.Manifest, tol); err != nil {
		return usageErr(fmt.Errorf("bundle %s: %w", dir, err))
	}
	graphs, err := f.selectGraphs(b, dir)
	if err != nil {
		return err
	}
	// The machine is checked once the input is known good: a wrong
	// bundle or graph is bad input (exit 2) on any machine.
	if _, err := FindORT(opts.Candidates, f.ortLib); err != nil {
		return err
	}
	// One digest for all graphs, not one per graph.
	if opts.BundleDigest, err = b.Digest(); err != nil {
		return err
	}
	finish := func() {}
	if mode := progressOn(cmd, cmd.ErrOrStderr()); mode != progressNone {
		prog := newTuneProgress(cmd.ErrOrStderr(), mode == progressLive)
		opts.Progress, opts.Observe = prog, prog.observe
		// Cleared before the table is printed, not deferred past it: on
		// a terminal the status line would stay with the header glued
		// to it.
		defer prog.finish()
		finish = prog.finish
	}
	results, err := tuneStaged(cmd.Context(), b, graphs, f.out, opts)
	finish()
	if err != nil {
		return err
	}
	return f.report(cmd.OutOrStdout(), results)
}

// options checks the flags before the bundle is read, and turns them into
// the tuner's options and the tolerance overrides.
func (f *tuneFlags) options(cmd *cobra.Command) (tuner.Options, []bundle.ToleranceOverride, error) {
	if f.out == "" {
		return tuner.Options{}, nil, usageErr(fmt.Errorf("--out DIR is required"))
	}
	// As from-onnx, merge and fetch: results of an earlier tuning left
	// beside new ones would be taken for them.
	if fi, err := os.Stat(f.out); err == nil {
		if !fi.IsDir() {
			return tuner.Options{}, nil, usageErr(fmt.Errorf("--out %s exists and is not a directory", f.out))
		}
		if entries, _ := os.ReadDir(f.out); len(entries) > 0 {
			return tuner.Options{}, nil, usageErr(fmt.Errorf("--out %s exists and is not empty: name a new or empty directory", f.out))
		}
	}
	if !okFormat(&f.format, "table") {
		return tuner.Options{}, nil, usageErr(fmt.Errorf("-o %q: want table or json", f.format))
	}
	strat, cands, err := f.parse()
	if err != nil {
		return tuner.Options{}, nil, err
	}
	rule := backend.DefaultStopRule()
	rule.MaxTime, rule.WarmupTime = f.benchTime, f.warmup
	opts := tuner.Options{
		Backends: Backends(f.ortLib), Strategy: strat, Candidates: cands,
		StopRule: rule, CandidateTimeout: f.timeout, FindMaxBatch: f.findMaxBatch, Baseline: f.baseline,
	}
	if err := opts.Validate(); err != nil {
		return opts, nil, usageErr(err)
	}
	tol, err := f.tolerances.parse()
	return opts, tol, err
}

// selectGraphs is --graph, checked against the bundle, or every graph.
func (f *tuneFlags) selectGraphs(b *bundle.Bundle, dir string) ([]string, error) {
	graphs := f.graphs
	if len(graphs) == 0 {
		for _, g := range b.Manifest.Graphs {
			graphs = append(graphs, g.Name)
		}
	}
	for _, g := range graphs {
		if _, ok := b.Manifest.Graph(g); !ok {
			return nil, usageErr(fmt.Errorf("bundle %s has no graph %q", dir, g))
		}
	}
	return graphs, nil
}

// report prints the results as -o asks, and fails when a graph has no
// winner.
func (f *tuneFlags) report(w io.Writer, results []*tuner.Result) error {
	if f.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		printResults(w, results)
		fmt.Fprintf(w, "results: %s\n", filepath.Join(f.out, "graphs", "*", tuner.ResultFile))
	}
	var failed []string
	for _, r := range results {
		if !r.OK() {
			failed = append(failed, r.Graph)
		}
	}
	if len(failed) > 0 {
		return failedErr(fmt.Errorf("no winner for graph(s) %s", strings.Join(failed, ", ")))
	}
	return nil
}

// tuneStaged tunes the graphs into a staging directory beside out and
// renames it to out once every graph has its result.json: an interrupted
// tune (Ctrl-C, SIGTERM, a crash) leaves no out that looks like results,
// only nothing (the staging directory is removed on every error; one a
// kill -9 leaves is hidden, named .OUT.partial-*).
func tuneStaged(ctx context.Context, b *bundle.Bundle, graphs []string, out string, opts tuner.Options) ([]*tuner.Result, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(stage)
		}
	}()
	var results []*tuner.Result
	for _, g := range graphs {
		r, err := tuner.TuneGraph(ctx, b, g, filepath.Join(stage, "graphs", g), opts)
		if err != nil {
			return nil, fmt.Errorf("graph %s: %w", g, err)
		}
		results = append(results, r)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.Chmod(stage, 0o755); err != nil { // MkdirTemp made it private
		return nil, err
	}
	// An empty out (checked before any work) is replaced: rename(2) moves
	// a directory onto an empty one.
	if err := os.Rename(stage, abs); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	done = true
	return results, nil
}

// printResults writes one row per candidate per graph: its best
// throughput (in human units, marked when the measurement as a whole was
// unstable), its calls, rounds and outliers, and the winner's decision
// (beyond noise, or a tie and its tie-break), and footnotes saying what
// the marks mean.
func printResults(w io.Writer, results []*tuner.Result) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GRAPH\tCANDIDATE\tSTATUS\tBUILD\tBEST SAMPLES/S\tAT BATCH\tP50 MS\tP99 MS\tCV\tCALLS\tNOTE")
	var unstable []unstableNote
	for _, r := range results {
		for i, c := range r.Results {
			var notes []string
			if r.Winner != nil && r.Winner.Index == i {
				notes = append(notes, "winner: "+r.Winner.Reason)
			}
			if c.SameEngineAs != "" {
				notes = append(notes, "identical engine to "+c.SameEngineAs+": measured once")
			}
			if c.Failure != nil {
				notes = append(notes, string(c.Failure.Class)+": "+firstLine(c.Failure.Message, 80))
			}
			note := strings.Join(notes, "; ")
			best, ok := c.BestThroughput(0)
			if r.Winner != nil && r.Winner.Index == i {
				// The winner's row shows the figure its reason names (a
				// latency budget picks within the budget, not the best).
				best, ok = strategy.Headline(&r.Winner.Selection, c.Benchmarks)
			}
			if !ok {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", r.Graph, c.Candidate, c.Status, dur(c.BuildTime), note)
				continue
			}
			mark := ""
			if !best.Stable {
				mark = history.Unstable
				unstable = append(unstable, unstableNote{fmt.Sprintf("graph %s %s at batch %d", r.Graph, c.Candidate, best.BatchSize), best.Cause()})
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s%s\t%d\t%s\t%s\t%.3f\t%s\t%s\n", r.Graph, c.Candidate, c.Status, dur(c.BuildTime),
				backend.Human(best.Throughput), mark, best.BatchSize, backend.Human(best.P50Ms), backend.Human(best.P99Ms), best.CV, callsCell(best), note)
		}
		if r.Winner == nil && r.Failure != nil {
			fmt.Fprintf(tw, "%s\t-\tno winner\t\t\t\t\t\t\t\t%s\n", r.Graph, firstLine(r.Failure.Message, 100))
		}
	}
	tw.Flush()
	if len(unstable) > 0 {
		fmt.Fprint(w, unstableFootnote(unstable, "measurement(s)"))
	}
	// Measured once instead of swept: the AT BATCH column alone would not
	// say whether that was a choice or all the inputs allow.
	for _, r := range results {
		if r.NoSweep != "" {
			fmt.Fprintf(w, "graph %s: no batch sweep: %s\n", r.Graph, r.NoSweep)
		}
	}
}

// callsCell is how a measurement was taken: its timed calls (with "short"
// when the cap stopped it before its minimum: "measured from N calls"),
// its rounds, and the outlier calls left out of its estimate.
func callsCell(st backend.Stats) string {
	s := fmt.Sprintf("%d", st.Samples)
	if st.Short {
		s = fmt.Sprintf("measured from %d", st.Samples)
	}
	if n := len(st.RoundMs); n > 1 {
		s += fmt.Sprintf(" in %d rounds", n)
	}
	if st.Outliers > 0 {
		s += fmt.Sprintf(", %d outlier(s)", st.Outliers)
	}
	return s
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		cut := n - 1
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut-- // never cut a character in half
		}
		s = s[:cut] + "…"
	}
	return s
}
