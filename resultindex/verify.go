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
	type named struct {
		what string
		key  string
		size int64
	}
	var objs []named
	for _, g := range st.Graphs {
		if g.Engine == nil || !engines {
			continue
		}
		ref := artifacts.Ref{SHA256: g.Engine.SHA256, Size: g.Engine.Size}
		if err := ref.Validate(); err != nil {
			return fmt.Errorf("graph %s engine: %w: %w", g.Name, err, ErrBadBlobs)
		}
		objs = append(objs, named{"graph " + g.Name + " engine", ref.Key(), ref.Size})
		for _, d := range g.Engine.Data {
			dref := artifacts.Ref{SHA256: d.SHA256, Size: d.Size}
			if err := dref.Validate(); err != nil {
				return fmt.Errorf("graph %s engine data %s: %w: %w", g.Name, d.File, err, ErrBadBlobs)
			}
			objs = append(objs, named{"graph " + g.Name + " engine data " + d.File, dref.Key(), dref.Size})
		}
	}
	if cp := st.AITune; cp != nil && cp.Error == "" {
		for _, f := range cp.Files {
			objs = append(objs, named{"AITune checkpoint file " + f.Path, cp.Prefix + f.Path, f.Size})
		}
	}
	slices.SortFunc(objs, func(a, b named) int { return strings.Compare(a.key, b.key) })
	objs = slices.CompactFunc(objs, func(a, b named) bool { return a.key == b.key && a.size == b.size })
	return parallel.ForEach(ctx, len(objs), 2*verifyParallel, func(ctx context.Context, i int) error {
		o := objs[i]
		info, err := store.Stat(ctx, o.key)
		if err == nil && info.Size != o.size {
			err = fmt.Errorf("%s in %s has %d bytes, state.json says %d: %w", o.key, store, info.Size, o.size, artifacts.ErrCorrupt)
		}
		return blobError(o.what, err)
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
