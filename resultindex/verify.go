package resultindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// ErrBadBlobs marks a result or state that names blobs the store no longer
// holds intact (deleted, truncated, bit-flipped). It is the store's
// damage, not a service failure: a worker drops such an indexed result and
// tunes again; finalize must not point latest.json at such a state. Errors
// wrapping it also wrap artifacts.ErrNotExist or artifacts.ErrCorrupt.
var ErrBadBlobs = errors.New("blobs missing or corrupt")

// verifyParallel bounds the blobs verified at once: enough to hide a
// store's latency, few enough not to saturate a worker's link while
// others tune.
const verifyParallel = 4

// VerifyResultBlobs re-hashes the blob a reused result is for: the
// winner's engine, which deploy tooling fetches and fetch would refuse if
// it were damaged. The other artifacts a result names (every candidate's
// logs, layer info) are not re-read: nothing deploys them, a damaged one
// costs only a log view, and checking them made a reused task cost five
// reads instead of one (the worker reuses every unchanged graph of a
// nightly run). The blob is streamed, never held in memory. A missing or
// corrupt engine gives an error wrapping ErrBadBlobs (and
// artifacts.ErrNotExist or artifacts.ErrCorrupt) naming it; any other
// error is the store's (retry later: the result may be good).
func VerifyResultBlobs(ctx context.Context, store artifacts.Store, res *tuner.Result) error {
	if res.Winner == nil || res.Winner.Engine == nil {
		return nil
	}
	e := res.Winner.Engine
	what := fmt.Sprintf("winner %s engine %s", res.Winner.Candidate, e.Path)
	if err := blobError(what, artifacts.VerifyBlob(ctx, store, artifacts.Ref{SHA256: e.SHA256, Size: e.Size})); err != nil {
		return err
	}
	// The engine's data deploys with it (fetch refuses an engine without).
	for _, d := range res.Winner.EngineData {
		what := fmt.Sprintf("winner %s engine data %s", res.Winner.Candidate, d.Path)
		if err := blobError(what, artifacts.VerifyBlob(ctx, store, artifacts.Ref{SHA256: d.SHA256, Size: d.Size})); err != nil {
			return err
		}
	}
	return nil
}

// VerifyStateBlobs checks, before finalize moves latest.json to a state,
// that every engine it names (and every file of its AITune checkpoint) is
// in the store with its recorded size, so that latest.json never moves to
// a state whose fetch would refuse. Missing or resized blobs give an error
// wrapping ErrBadBlobs and artifacts.ErrNotExist or artifacts.ErrCorrupt;
// any other error is the store's.
//
// It does not re-hash: each engine was content-verified minutes before, by
// the upload (artifacts.PutFileAs re-hashes a blob that was there) or by the
// reuse check (VerifyResultBlobs), and re-reading every engine of the run
// here (TensorRT engines: gigabytes per graph) would double a run's
// transfer to close a window of minutes. What happens in that window —
// a delete, a lifecycle rule, a truncated overwrite — changes the size or
// removes the key, which one Stat per blob sees; fetch still verifies
// every byte.
func VerifyStateBlobs(ctx context.Context, store artifacts.Store, st *state.State) error {
	return verifyStateBlobs(ctx, store, st, true)
}

// VerifyCheckpointBlobs is VerifyStateBlobs for the files of the state's
// AITune checkpoint only: finalize calls it when every engine was checked
// already (the results it publishes were reused and their engines Stat'ed
// moments before).
func VerifyCheckpointBlobs(ctx context.Context, store artifacts.Store, st *state.State) error {
	return verifyStateBlobs(ctx, store, st, false)
}

// verifyStateBlobs is VerifyStateBlobs, the engines' only when engines is set.
func verifyStateBlobs(ctx context.Context, store artifacts.Store, st *state.State, engines bool) error {
	var b StateBlobs
	if engines {
		for _, g := range st.Graphs {
			b.AddGraph(&g)
		}
	}
	b.AddCheckpoint(st.AITune)
	return b.Verify(ctx, store)
}

// StateBlobs gathers what VerifyStateBlobs checks a graph at a time, for a
// finalize that does not hold the state's graphs: AddGraph as each is
// built, AddCheckpoint, then Verify. It holds the key and size of each
// blob named (a few dozen bytes a graph), not the graphs.
type StateBlobs struct {
	objs []stateBlob
	err  error // the first ref that is not one
}

// stateBlob is a blob a state names; what says which (built from graph
// and file when an error names it).
type stateBlob struct {
	graph, file string // file: an engine's data file; "" the engine
	key         string
	size        int64
	checkpoint  bool // file is a checkpoint file's path
}

func (o stateBlob) what() string {
	switch {
	case o.checkpoint:
		return "AITune checkpoint file " + o.file
	case o.file != "":
		return "graph " + o.graph + " engine data " + o.file
	}
	return "graph " + o.graph + " engine"
}

// AddGraph adds the engine a graph of the state names, and its data.
func (b *StateBlobs) AddGraph(g *state.StateGraph) {
	if g.Engine == nil || b.err != nil {
		return
	}
	ref := artifacts.Ref{SHA256: g.Engine.SHA256, Size: g.Engine.Size}
	if err := ref.Validate(); err != nil {
		b.err = fmt.Errorf("graph %s engine: %w: %w", g.Name, err, ErrBadBlobs)
		return
	}
	b.objs = append(b.objs, stateBlob{graph: g.Name, key: ref.Key(), size: ref.Size})
	for _, d := range g.Engine.Data {
		dref := artifacts.Ref{SHA256: d.SHA256, Size: d.Size}
		if err := dref.Validate(); err != nil {
			b.err = fmt.Errorf("graph %s engine data %s: %w: %w", g.Name, d.File, err, ErrBadBlobs)
			return
		}
		b.objs = append(b.objs, stateBlob{graph: g.Name, file: d.File, key: dref.Key(), size: dref.Size})
	}
}

// AddCheckpoint adds the files of the state's AITune checkpoint (nil, or
// one that could not be written: none).
func (b *StateBlobs) AddCheckpoint(cp *state.Checkpoint) {
	if cp == nil || cp.Error != "" {
		return
	}
	for _, f := range cp.Files {
		b.objs = append(b.objs, stateBlob{file: f.Path, key: cp.Prefix + f.Path, size: f.Size, checkpoint: true})
	}
}

// Verify is VerifyStateBlobs of the blobs added: one Stat a blob.
func (b *StateBlobs) Verify(ctx context.Context, store artifacts.Store) error {
	if b.err != nil {
		return b.err
	}
	objs := b.objs
	slices.SortFunc(objs, func(a, b stateBlob) int { return strings.Compare(a.key, b.key) })
	objs = slices.CompactFunc(objs, func(a, b stateBlob) bool { return a.key == b.key && a.size == b.size })
	return parallel.ForEach(ctx, len(objs), 2*verifyParallel, func(ctx context.Context, i int) error {
		o := objs[i]
		info, err := store.Stat(ctx, o.key)
		if err == nil && info.Size != o.size {
			err = fmt.Errorf("%s in %s has %d bytes, state.json says %d: %w", o.key, store, info.Size, o.size, artifacts.ErrCorrupt)
		}
		return blobError(o.what(), err)
	})
}

// blobError names what a failed verification was about and marks the
// store's damage (as opposed to its unavailability) with ErrBadBlobs.
func blobError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, artifacts.ErrNotExist), errors.Is(err, artifacts.ErrCorrupt):
		return fmt.Errorf("%s: %w: %w", what, ErrBadBlobs, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
