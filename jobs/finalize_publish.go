// Finalize's publishing: the state's bytes, the graphs' results,
// latest.json (signed where a key is set) and the model's history entry,
// in the order that keeps a crash from leaving anything half-written.

package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/jsondoc"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
	"golang.org/x/sync/errgroup"
)

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
			// The work id and the platform it ran on let the next
			// nightly of the same work carry this run forward (package
			// fleet) with one read of the class's pointer.
			l := state.Latest{
				Format: state.LatestFormat, Model: spec.Model, Platform: where, Run: spec.Run, StateKey: ref.Key(),
				StateSHA256: ref.SHA256, SubmittedAt: spec.SubmittedAt, Work: spec.Work,
			}
			if where != ms.Platform {
				l.RunPlatform = ms.Platform
			}
			g.Go(func() error {
				return moveLatest(gctx, w.runs, w.cfg.Store, w.cfg.Signer, l)
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
			return history.AddToHead(ctx, store, e.Model, wheres[i], key, e.Platform)
		}))
	})
}
