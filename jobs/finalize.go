package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/jsondoc"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/internal/version"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/provenance"
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

// concat writes head, what part holds and tail to w.
func concat(w io.Writer, head []byte, part *spool, tail []byte) error {
	r, err := part.reader()
	if err != nil {
		return err
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		return err
	}
	_, err = w.Write(tail)
	return err
}

// publishFinal points latest.json (a good state) and the model's history
// (a good or failed one) at a content-addressed copy of the state: two
// finalize attempts racing (their finalized_at differs) can never leave
// either pointing at bytes of another digest. It runs before Finish: a
// finalize that failed after it would find the run final and never append.
// A cancelled run says nothing about the model and has no entry.
func (w *Worker) publishFinal(ctx context.Context, sps *spools, spec *RunSpec, out *finalOutputs) error {
	ms, ref := out.state, out.stateRef
	// The bytes carry this finalize's finalized_at: no store holds them
	// yet, so they are written without a look first.
	r, err := out.stateJSON.reader()
	if err != nil {
		return err
	}
	if err := w.cfg.Store.Put(ctx, ref.Key(), r, ref.Size); err != nil {
		return fmt.Errorf("write state blob: put blob %s: %w", ref.Key(), err)
	}
	// The history entry: its head and tail around the graphs the pass
	// wrote, as AppendAt would encode the whole.
	e := out.history.Entry(ms, ref, spec.Nightly).WithRun(spec.Manifest.Graphs, spec.BenchTime, spec.Warmup, spec.Remeasure)
	doc, err := jsondoc.Split(e, "graphs")
	if err != nil {
		return fmt.Errorf("encode the history entry: %w", err)
	}
	entry := sps.new("history.json")
	if err := concat(entry, doc.Head, out.histGraphs, doc.Tail); err != nil {
		return fmt.Errorf("write the history entry: %w", err)
	}
	out.histGraphs.drop()
	// The blob is there: latest.json (under each key) and the history
	// entries may name it, all at once (each has its own lock).
	g, gctx := errgroup.WithContext(ctx)
	if ms.Status == runstate.RunDone {
		// Deploy tooling resolves by exact platform key, or by target class
		// ("the newest good state for gpu.h100").
		for _, where := range uniq(ms.Platform, spec.Target) {
			g.Go(func() error {
				return moveLatest(gctx, w.runs, w.cfg.Store, w.cfg.Signer, state.Latest{
					Format: state.LatestFormat, Model: spec.Model, Platform: where, Run: spec.Run, StateKey: ref.Key(),
					StateSHA256: ref.SHA256, SubmittedAt: spec.SubmittedAt,
				})
			})
		}
	}
	g.Go(func() error { return appendHistory(gctx, w.runs, w.cfg.Store, e, entry) })
	return g.Wait()
}

// publishResults reads the result of the attempt that completed each graph
// (Redis recorded its key, count-once), copies it to the graph's
// result.json and hands it to fn, in the manifest's order (nil: the graph
// has no result). A late duplicate attempt writes only under its own
// attempt key, so what a finished run's result.json says never changes
// after finalize; a repeated finalize writes the same bytes. Graphs are
// read and written in parallel, a window at a time (parallel.Ordered): a
// store's latency, not its bandwidth, is what a model of many graphs would
// wait on, and a run of 10,000 graphs is not held at once.
func publishResults(ctx context.Context, store artifacts.Store, spec *RunSpec, st runstate.RunStatus, fn func(i int, r *tuner.Result) error) error {
	graphs := spec.Manifest.Graphs
	return parallel.Ordered(ctx, len(graphs), 8, publishWindow, func(ctx context.Context, i int) (*tuner.Result, error) {
		g := graphs[i].Name
		to := artifacts.GraphResultKey(spec.Run, g)
		from := orDefault(st.Graphs[g].ResultKey, to) // none recorded: a run from before attempt keys
		data, err := artifacts.ReadObject(ctx, store, from, artifacts.MaxJSONSize)
		if errors.Is(err, artifacts.ErrNotExist) {
			return nil, nil // BuildState reports the graph as having no result
		}
		if err != nil {
			return nil, fmt.Errorf("read graph %s result: %w", g, err)
		}
		var r tuner.Result
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("decode %s in %s: %w", from, store, err)
		}
		if from != to {
			if err := store.Put(ctx, to, bytes.NewReader(data), int64(len(data))); err != nil {
				return nil, fmt.Errorf("publish graph %s result: %w", g, err)
			}
		}
		return &r, nil
	}, fn)
}

// publishWindow is how many graphs' results publishResults reads at a
// time: it holds at most three windows of them (about 20 KiB a result).
const publishWindow = 64

// moveLatest points latest.json at a run unless it already points at a run
// submitted later (finalizes may complete out of order). Runs of one model
// and platform finalize on different workers at the same moment (a nightly
// re-run and a hand-submitted one), so the read-compare-write holds a
// Redis lock per latest.json: without it the older run could write last.
//
// Each move takes the next sequence (the one before plus one, read under
// the lock) and the time; with a signer, the signed pointer saying the
// same goes up first (latest.intoto.jsonl), so deploy tooling that
// verifies resolves through it and can refuse a pointer rolled back to an
// older run. A pointer already at the run is left as it is: a repeated
// finalize does not move it on.
func moveLatest(ctx context.Context, runs *runstate.Runs, store artifacts.Store, signer *provenance.Signer, l state.Latest) error {
	key := artifacts.LatestKey(l.Model, l.Platform)
	return runs.Locked(ctx, key, func(ctx context.Context) error {
		var cur state.Latest
		err := artifacts.GetJSON(ctx, store, key, &cur)
		switch {
		case err == nil && cur.Run != l.Run && cur.SubmittedAt.After(l.SubmittedAt):
			return nil
		case err == nil && cur.Run == l.Run && cur.StateSHA256 == l.StateSHA256 && cur.Sequence > 0 && (signer == nil || pointerThere(ctx, store, l)):
			return nil
		case err != nil && !errors.Is(err, artifacts.ErrNotExist):
			return err
		}
		l.Sequence, l.MovedAt = cur.Sequence+1, time.Now().UTC()
		if cur.Run == l.Run && cur.StateSHA256 == l.StateSHA256 && cur.Sequence > 0 {
			l.Sequence = cur.Sequence // the same move again (its pointer was lost)
		}
		if signer != nil {
			line, err := provenance.SignPointer(ctx, signer, provenance.Pointer{
				Model: l.Model, Platform: l.Platform, Run: l.Run, StateSHA256: l.StateSHA256, Sequence: l.Sequence, MovedAt: l.MovedAt,
			})
			if err != nil {
				return fmt.Errorf("sign the latest pointer of %s on %s: %w", l.Model, l.Platform, err)
			}
			pk := artifacts.LatestPointerKey(l.Model, l.Platform)
			if err := store.Put(ctx, pk, bytes.NewReader(line), int64(len(line))); err != nil {
				return permanentIfBadKey(fmt.Errorf("write %s: %w", pk, err))
			}
		}
		return artifacts.PutJSON(ctx, store, key, l)
	})
}

// pointerThere says whether the signed pointer of l's model and platform
// exists (a finalize repeated after it wrote latest.json).
func pointerThere(ctx context.Context, store artifacts.Store, l state.Latest) bool {
	_, err := artifacts.ReadObject(ctx, store, artifacts.LatestPointerKey(l.Model, l.Platform), artifacts.MaxJSONSize)
	return err == nil
}

// appendHistory appends a finalized run's history entry (e, without its
// graphs; encoded, the whole of it), once: under the
// state's platform key and, like latest.json, under its target class
// ("the history of demo_mlp on cpu"). The entry's key is fixed by the run
// (its submission time and id), so a repeated finalize finds it and
// writes nothing. A store that writes conditionally (artifacts.Creator)
// makes that one atomic request; for another, a Redis lock closes the
// window between the look-up and the write when two finalize attempts race.
func appendHistory(ctx context.Context, runs *runstate.Runs, store artifacts.Store, e *history.Entry, encoded *spool) error {
	wheres := uniq(e.Platform, e.Target)
	_, atomic := store.(artifacts.Creator)
	return parallel.ForEach(ctx, len(wheres), len(wheres), func(ctx context.Context, i int) error {
		// The entry says where it ran (its platform key) under either key.
		key := history.Key(e.Model, wheres[i], e.Created, e.Run)
		write := func(ctx context.Context) error {
			r, err := encoded.reader()
			if err != nil {
				return err
			}
			_, err = history.AppendEncodedAt(ctx, store, key, e.Run, r, r.Size())
			return err
		}
		var err error
		if atomic {
			err = write(ctx)
		} else {
			err = runs.Locked(ctx, key, write)
		}
		if err != nil {
			return permanentIfBadKey(err)
		}
		// The entry is there: name it in the head, which what reads the
		// newest entries reads instead of listing the whole history. Added
		// whether this finalize wrote the entry or an earlier one did (and
		// was cut short before its head).
		head := history.HeadKey(e.Model, wheres[i])
		return permanentIfBadKey(runs.Locked(ctx, head, func(ctx context.Context) error {
			return history.AddToHead(ctx, store, e.Model, wheres[i], key)
		}))
	})
}

// BuildState assembles the module state from run.json, the run's status
// and the graphs' results (by graph name). A graph without a winner (or
// without a result) fails the run. (Finalize builds the same state a
// graph at a time, never holding it whole: finalizeGraphs.)
func BuildState(spec *RunSpec, st runstate.RunStatus, results map[string]*tuner.Result) *state.State {
	b := newStateBuilder(spec, st)
	var graphs []state.StateGraph
	for _, g := range spec.Manifest.Graphs {
		graphs = append(graphs, b.add(g, results[g.Name]))
	}
	s := b.finish()
	s.Graphs = graphs
	return s
}

// stateBuilder builds a module state a graph at a time: add builds each
// graph's entry and keeps what the state says of all of them (its status,
// the reasons, the workers), not the entry; finish is the state without
// its graphs.
type stateBuilder struct {
	spec    *RunSpec
	st      runstate.RunStatus
	s       *state.State
	workers map[string]bool
}

func newStateBuilder(spec *RunSpec, st runstate.RunStatus) *stateBuilder {
	s := &state.State{
		Format: state.StateFormat, Model: spec.Model, Platform: orDefault(st.Platform, spec.Target), Target: spec.Target, Run: spec.Run, Status: runstate.RunDone,
		Provenance: state.Provenance{
			Tunefleet: version.String(), Go: version.Go(), BundleDigest: spec.BundleDigest, Target: spec.Target,
			Strategy: spec.Strategy, LatencyBudgetMs: spec.LatencyBudgetMs, Candidates: spec.Candidates,
			Command: spec.Command, SubmittedBy: spec.SubmittedBy, SubmittedAt: spec.SubmittedAt, FinalizedAt: time.Now().UTC(),
		},
	}
	return &stateBuilder{spec: spec, st: st, s: s, workers: map[string]bool{}}
}

// add is the state's entry of graph g, whose result is r (nil: none), in
// the manifest's order.
func (b *stateBuilder) add(g bundle.Graph, r *tuner.Result) state.StateGraph {
	s := b.s
	sg := state.StateGraph{Name: g.Name, Inputs: g.Inputs, Outputs: g.Outputs, ResultKey: artifacts.GraphResultKey(b.spec.Run, g.Name)}
	switch {
	case r == nil:
		gs := b.st.Graphs[g.Name]
		sg.Failure = &backend.FailureInfo{Class: backend.FailureClass(orDefault(gs.Class, string(backend.FailInfrastructure))), Message: orDefault(gs.Message, "no result was recorded")}
	default:
		sg.Profile = r.Profile
		if r.FoundMaxBatch > 0 {
			// The engine was built for the range the find-max-batch
			// step extended (AITune's update_max_batch_size): the
			// state and the checkpoint declare that range.
			sg.Inputs = maxbatch.Extend(g.Inputs, r.FoundMaxBatch)
		}
		sg.Worker = r.Worker
		if r.Worker != "" {
			b.workers[r.Worker] = true
		}
		if r.OK() {
			sel := r.Winner.Selection
			sg.Candidate = sel.Candidate
			sg.Selection = &sel
			win := r.Results[sel.Index]
			sg.Benchmarks = win.Benchmarks
			sg.Info = win.Info
			sg.Requires = stateRequires(r, sel.Candidate, win.Info, s.Platform)
			if e := r.Winner.Engine; e != nil {
				sg.Engine = &state.EngineRef{Key: artifacts.BlobKey(e.SHA256), File: baseName(e.Path), SHA256: e.SHA256, Size: e.Size, Data: engineData(e.Path, r.Winner.EngineData)}
			}
		} else {
			sg.Failure = r.Failure
		}
	}
	if sg.Failure != nil || sg.Engine == nil {
		s.Status = runstate.RunFailed
		msg := "no engine"
		if sg.Failure != nil {
			msg = fmt.Sprintf("%s: %s", sg.Failure.Class, firstLine(sg.Failure.Message))
		}
		s.Reasons = append(s.Reasons, fmt.Sprintf("graph %s: %s", g.Name, msg))
	}
	return sg
}

// finish is the state of the graphs added, without them.
func (b *stateBuilder) finish() *state.State {
	s, st := b.s, b.st
	if st.Status == runstate.RunCancelled || !st.CancelRequested.IsZero() {
		s.Status = runstate.RunCancelled
		s.Reasons = append([]string{"cancelled at " + st.CancelRequested.Format(time.RFC3339)}, s.Reasons...)
	}
	for wk := range b.workers {
		s.Provenance.Workers = append(s.Provenance.Workers, wk)
	}
	sort.Strings(s.Provenance.Workers)
	return s
}

func uniq(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" && (len(out) == 0 || out[len(out)-1] != x) {
			out = append(out, x)
		}
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// engineData names the files an engine reads beside itself by their path
// relative to the engine's directory (how the engine names them, and where
// fetch puts them).
func engineData(engine string, files []backend.FileRef) []state.EngineDataRef {
	var out []state.EngineDataRef
	dir := path.Dir(engine) + "/"
	for _, f := range files {
		out = append(out, state.EngineDataRef{Key: artifacts.BlobKey(f.SHA256), File: strings.TrimPrefix(f.Path, dir), SHA256: f.SHA256, Size: f.Size})
	}
	return out
}

func baseName(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// permanentIfBadKey marks an error the store gave because of a key it can
// never hold (too long) as permanent: retrying the finalize cannot help.
func permanentIfBadKey(err error) error {
	if errors.Is(err, artifacts.ErrBadKey) {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
