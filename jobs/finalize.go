package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/jsondoc"
	"github.com/tunefleet/tunefleet/resultindex"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// ProcessFinalize turns a run's graph results into its module state.
func (w *Worker) ProcessFinalize(ctx context.Context, t *asynq.Task) error {
	var p FinalizePayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.V != PayloadVersion || p.Run == "" {
		return fmt.Errorf("tune:finalize: bad payload %q: %w", t.Payload(), asynq.SkipRetry)
	}
	return w.finalize(ctx, p)
}

// finalizeSafetyDelay is how long the finalize task that backs an inline
// finalize waits before it runs (and, normally, finds the run final).
const finalizeSafetyDelay = 15 * time.Second

// finalizeNow finalizes a run whose last graph this worker just completed,
// at once: handing it over as a task would wait for a worker's next poll
// (up to PollInterval, most of the hand-over of a run whose graphs were
// all reused). A finalize task is enqueued first, delayed, as the safety
// net should this worker die or the finalize fail here; it is deleted when
// the finalize succeeds, and otherwise finalizes the run with the usual
// retries (or finds it final and does nothing).
func (w *Worker) finalizeNow(ctx context.Context, run, target string) error {
	if err := enqueueFinalizeIn(ctx, w.runs, w.q, run, target, finalizeSafetyDelay); err != nil {
		return err
	}
	switch err := w.finalize(ctx, FinalizePayload{V: PayloadVersion, Run: run}); {
	case err == nil:
		// Finalized: the safety net has nothing to do; drop it rather
		// than leave a no-op task scheduled (best effort).
		if gen, gerr := w.runs.FinalizeGen(ctx, run); gerr == nil {
			w.insp.DeleteTask(Queue(target), FinalizeTaskID(run, gen))
		}
	case errors.Is(err, asynq.SkipRetry):
		w.giveUpFinalize(ctx, run, err) // the queued task then finds it final
	case err != nil:
		w.warnf("run %s: finalize failed here; its queued finalize task tries again in %s: %v", run, finalizeSafetyDelay, err)
		// The safety net is now what finalizes the run: the duplicate
		// tasks of its graphs need not look for it.
		if gen, gerr := w.runs.FinalizeGen(ctx, run); gerr == nil {
			markFinalizeQueued(ctx, w.runs, run, gen)
		}
	}
	return nil
}

func (w *Worker) finalize(ctx context.Context, p FinalizePayload) error {
	return w.finalizeKnown(ctx, p, nil)
}

// knownRun is what a finalize need not read back from the store: the
// run.json and graph results of a run whose every graph the caller has just
// completed from the result index, with their winners' engines checked
// there (resultindex.Everywhere) moments before. An unchanged nightly finalizes
// every model so; each read saved is a round trip per model per night.
type knownRun struct {
	spec    *RunSpec
	results map[string]*tuner.Result
}

// finalizeKnown is finalize, given what the caller knows (nil: nothing).
func (w *Worker) finalizeKnown(ctx context.Context, p FinalizePayload, known *knownRun) error {
	st, err := w.runs.Get(ctx, p.Run)
	if errors.Is(err, runstate.ErrNoRun) {
		// Redis lost the run: rebuild it from the store. Its graphs may be
		// pending again; then this finalize is early, and the graphs' own
		// tasks (re-enqueued by the reconciler) will enqueue another.
		if _, rerr := Restore(ctx, w.runs, w.cfg.Store, p.Run); rerr != nil {
			if errors.Is(rerr, runstate.ErrNoRun) {
				return fmt.Errorf("finalize: %w: %w", rerr, asynq.SkipRetry)
			}
			return rerr
		}
		st, err = w.runs.Get(ctx, p.Run)
	}
	if err != nil {
		return err
	}
	if st.Final() {
		return nil // finalized before: a repeated task does nothing
	}
	if st.Done+st.Failed+st.Cancelled < st.Total {
		return nil // graphs still pending (a restored run): not due yet
	}
	if !known.covers(st) {
		known = nil
		var spec RunSpec
		if err := artifacts.GetJSON(ctx, w.cfg.Store, artifacts.RunKey(p.Run), &spec); err != nil {
			if errors.Is(err, artifacts.ErrNotExist) {
				// Nothing to build a state from: the run fails, visibly.
				_, ferr := w.runs.Finish(ctx, p.Run, runstate.RunFailed, "run.json is missing from "+w.cfg.Store.String(), "")
				return ferr
			}
			return err
		}
		return w.publishState(ctx, &spec, st, func(ctx context.Context, fn func(int, *tuner.Result) error) error {
			return permanentIfBadKey(publishResults(ctx, w.cfg.Store, &spec, st, fn))
		}, false)
	}
	return w.publishState(ctx, known.spec, st, func(ctx context.Context, fn func(int, *tuner.Result) error) error {
		for i, g := range known.spec.Manifest.Graphs {
			if err := fn(i, known.results[g.Name]); err != nil {
				return err
			}
		}
		return nil
	}, true)
}

// eachResult calls fn with each graph's result in the manifest's order
// (nil: the graph has none), holding few of them at once.
type eachResult func(ctx context.Context, fn func(i int, r *tuner.Result) error) error

// covers reports whether k holds the result of every graph of the run as
// its record says it completed (at the graph's own result.json, as the
// producer completes a reused graph), so that nothing need be read back.
func (k *knownRun) covers(st runstate.RunStatus) bool {
	if k == nil || k.spec == nil || st.Status == runstate.RunCancelled || !st.CancelRequested.IsZero() {
		return false
	}
	for _, g := range k.spec.Manifest.Graphs {
		gs, ok := st.Graphs[g.Name]
		if !ok || k.results[g.Name] == nil || gs.Status != runstate.GraphDone || gs.ResultKey != artifacts.GraphResultKey(k.spec.Run, g.Name) {
			return false
		}
	}
	return true
}

// publishState builds the run's module state from its results and
// publishes it: the AITune checkpoint, state.json, report.html, latest.json,
// the history entry, and last the run's end in Redis. enginesChecked: the
// caller has just checked every winner's engine (knownRun), so only what
// this finalize writes is checked again.
//
// It holds no graph's result longer than it takes to write the graph's
// parts of the outputs (finalizeGraphs), and the outputs themselves are
// written to files past a megabyte (spools): a finalize's memory does not
// grow with the run's graphs but by what run.json and the run's record
// hold of each, and a few dozen bytes more.
func (w *Worker) publishState(ctx context.Context, spec *RunSpec, st runstate.RunStatus, each eachResult, enginesChecked bool) error {
	sps := newSpools(w.cfg.WorkDir)
	defer sps.remove()
	out, err := w.finalizeGraphs(ctx, sps, spec, st, each, enginesChecked)
	if err != nil {
		return err
	}
	ms := out.state
	key := artifacts.StateKey(spec.Run)
	// state.json, report.html and what names the state (latest.json, the
	// history) go up together: none points at another, and a model's
	// finalize is otherwise a dozen round trips one after the other.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		r, err := out.stateJSON.reader()
		if err != nil {
			return err
		}
		if err := w.cfg.Store.Put(gctx, key, r, r.Size()); err != nil {
			return permanentIfBadKey(fmt.Errorf("write state.json: %w", err))
		}
		return nil
	})
	g.Go(func() error { return putRunReport(gctx, w.cfg.Store, sps, spec, st, ms, out) })
	if ms.Status == runstate.RunDone || ms.Status == runstate.RunFailed {
		g.Go(func() error { return w.publishFinal(gctx, sps, spec, out) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	first, err := w.runs.Finish(ctx, spec.Run, ms.Status, strings.Join(ms.Reasons, "; "), key)
	if err != nil {
		return err
	}
	if first {
		w.logf("run %s: %s, state %s", spec.Run, ms.Status, key)
		// What a listing shows of the run, kept in its record so that a
		// page of runs does not read every graph of each. Only a view:
		// without it the listing sums the graphs up itself.
		if err := w.runs.SetSummary(ctx, spec.Run, st.Summary()); err != nil {
			w.logf("run %s: %v (listings sum its graphs instead)", spec.Run, err)
		}
	}
	return nil
}

// finalOutputs is what finalizeGraphs wrote: state.json whole, the
// graphs' parts of report.html and of the history entry, and what the
// rest of those says of all the graphs.
type finalOutputs struct {
	// state is the module state without its graphs (those are in
	// stateJSON); stateRef is stateJSON's digest and size.
	state     *state.State
	stateJSON *spool
	stateRef  artifacts.Ref
	// report holds the bars of the report's summary chart; rows and
	// sections the graphs' rows and sections.
	report         *runreport.Stream
	rows, sections *spool
	// history counted the entry's graphs, histGraphs holds them (the
	// value of its "graphs").
	history    history.Tally
	histGraphs *spool
}

// finalizeGraphs builds the module state from the graphs' results, one
// graph at a time (each writes its entry of state.json, its row and
// section of report.html and its entry of the history into spools, and is
// let go), then what is said of them all: the status, the AITune
// checkpoint, the check of the blobs the state names, state.json whole,
// its attestation.
func (w *Worker) finalizeGraphs(ctx context.Context, sps *spools, spec *RunSpec, st runstate.RunStatus, each eachResult, enginesChecked bool) (*finalOutputs, error) {
	out := &finalOutputs{rows: sps.new("report-rows.html"), sections: sps.new("report-sections.html"), histGraphs: sps.new("history-graphs.json")}
	out.report = runreport.NewStream(out.rows, out.sections)
	stateGraphs := sps.new("state-graphs.json")
	b := newStateBuilder(spec, st)
	graphsJSON := jsondoc.NewArray(stateGraphs)
	graphsJSON.Null = true // BuildState's graphs are nil when there are none
	histJSON := jsondoc.NewArray(out.histGraphs)
	var blobs resultindex.StateBlobs
	// The checkpoint of an AITune block reads every graph at once
	// (aitune.Write), and so does the attestation (signed whole): those
	// keep what they need.
	var cpGraphs, signGraphs []state.StateGraph
	var signResults map[string]*tuner.Result
	aitune, sign := len(spec.Manifest.AITune) > 0, w.cfg.Signer != nil
	if sign {
		signResults = map[string]*tuner.Result{}
	}

	// The report renders beside the rest: it is the pass's largest cost.
	type item struct {
		name string
		r    *tuner.Result
	}
	items := make(chan item, 64)
	reported := make(chan error, 1)
	go func() {
		var err error
		for it := range items {
			if err == nil {
				err = out.report.Add(reportGraph(st, it.name, it.r))
			}
		}
		reported <- err
	}()
	err := each(ctx, func(i int, r *tuner.Result) error {
		g := spec.Manifest.Graphs[i]
		items <- item{g.Name, r}
		sg := b.add(g, r)
		if !enginesChecked {
			blobs.AddGraph(&sg)
		}
		if err := graphsJSON.Add(&sg); err != nil {
			return fmt.Errorf("write state.json: %w", err)
		}
		if err := histJSON.Add(out.history.Graph(sg, r)); err != nil {
			return fmt.Errorf("write the history entry: %w", err)
		}
		if aitune {
			cpGraphs = append(cpGraphs, state.StateGraph{Name: sg.Name, Inputs: sg.Inputs, Profile: sg.Profile, Candidate: sg.Candidate, Engine: sg.Engine})
		}
		if sign {
			signGraphs = append(signGraphs, sg)
			if r != nil {
				signResults[g.Name] = r
			}
		}
		return nil
	})
	close(items)
	if rerr := <-reported; err == nil && rerr != nil {
		err = fmt.Errorf("write report.html: %w", rerr)
	}
	if err == nil {
		err = errors.Join(graphsJSON.Close(), histJSON.Close())
	}
	if err != nil {
		return nil, err
	}
	ms := b.finish()
	if ms.Status == runstate.RunDone && aitune {
		// A checkpoint the aitune block cannot make is recorded in the
		// state; one the store failed to take is retried, with the whole
		// finalize, rather than published as missing.
		if ms.AITune, err = writeCheckpoint(ctx, w.cfg.Store, w.cfg.WorkDir, spec, &state.State{Graphs: cpGraphs}); err != nil {
			return nil, fmt.Errorf("write the AITune checkpoint: %w", err)
		}
	}
	if ms.Status == runstate.RunDone {
		// Never publish as done (and move latest.json to) a state whose
		// engines fetch would refuse: a blob gone or cut short fails the
		// run with the reason; a store that does not answer is retried.
		// (enginesChecked: no engine was added, the checkpoint's files
		// alone are checked.)
		blobs.AddCheckpoint(ms.AITune)
		if err := blobs.Verify(ctx, w.cfg.Store); errors.Is(err, resultindex.ErrBadBlobs) {
			ms.Status = runstate.RunFailed
			ms.Reasons = append(ms.Reasons, err.Error())
		} else if err != nil {
			return nil, err
		}
	}
	// state.json: the state's head and tail around its graphs, byte for
	// byte json.MarshalIndent of the whole (jsondoc).
	head := *ms
	head.Graphs = []state.StateGraph{}
	doc, err := jsondoc.Split(&head, "graphs")
	if err != nil {
		return nil, fmt.Errorf("encode state.json: %w", err)
	}
	out.stateJSON = sps.new("state.json")
	sum := sha256.New()
	if err := concat(io.MultiWriter(out.stateJSON, sum), doc.Head, stateGraphs, doc.Tail); err != nil {
		return nil, fmt.Errorf("write state.json: %w", err)
	}
	stateGraphs.drop()
	out.stateRef = artifacts.Ref{SHA256: hex.EncodeToString(sum.Sum(nil)), Size: out.stateJSON.size}
	out.state = ms
	if sign && ms.Status == runstate.RunDone {
		full := *ms
		full.Graphs = signGraphs
		r, err := out.stateJSON.reader()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read state.json back: %w", err)
		}
		if err := signRun(ctx, w.cfg.Store, w.cfg.Signer, spec, &full, signResults, data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// permanentIfBadKey marks an error the store gave because of a key it can
// never hold (too long) as permanent: retrying the finalize cannot help.
func permanentIfBadKey(err error) error {
	if errors.Is(err, artifacts.ErrBadKey) {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
