package resultindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/tuner"
)

// The result index: results/<platform>/<work key>.json holds the result a
// graph's work gave on a platform (artifacts.ResultIndexKey). A worker
// writes it when a graph is tuned with an engine and reads it before it
// tunes; the producer reads it to skip work before enqueuing (nightly).
// An entry is the newest measurement of its work: a run measuring with
// other settings (bench time, warm-up: Measured) or asked to measure again
// (--remeasure) tunes the graph and its result supersedes the entry; else
// an entry is overwritten with an equal result at most. A damaged one is
// dropped, never trusted.

// Get reads the indexed result of workKey on platform. A work key with no
// entry gives an error wrapping artifacts.ErrNotExist.
func Get(ctx context.Context, store artifacts.Store, platform, workKey string) (*tuner.Result, error) {
	var res tuner.Result
	if err := artifacts.GetJSON(ctx, store, artifacts.ResultIndexKey(platform, workKey), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Measured reports whether an indexed result was measured with the stop
// rule a run asks for, as far as the run's submission decides it: the
// bench time and the warm-up bound (--bench-time, --warmup). The work key
// leaves them out, so that a longer measurement supersedes the entry of
// the shorter one instead of standing beside it; a result measured
// otherwise is not reused, since its figures are not the ones the run
// asked for (a longer --bench-time is the advice for a noisy figure).
func Measured(res *tuner.Result, want backend.StopRule) bool {
	return res.StopRule.MaxTime == want.MaxTime && res.StopRule.WarmupLimit() == want.WarmupLimit()
}

// Put indexes res as the result of workKey on platform.
func Put(ctx context.Context, store artifacts.Store, platform, workKey string, res *tuner.Result) error {
	return artifacts.PutJSON(ctx, store, artifacts.ResultIndexKey(platform, workKey), res)
}

// Reusable verifies the blobs of an indexed result before a worker reuses
// it (VerifyResultBlobs). ok false: some are missing or corrupt (damage
// says what), so the index entry has been dropped (no other worker reuses
// it meanwhile) and the graph must be tuned again; its upload then repairs
// the blobs. An error is the store's: the task tries again later, and the
// entry stays.
func Reusable(ctx context.Context, store artifacts.Store, platform, workKey string, res *tuner.Result) (ok bool, damage, err error) {
	verr := VerifyResultBlobs(ctx, store, res)
	if verr == nil {
		return true, nil, nil
	}
	if !errors.Is(verr, ErrBadBlobs) {
		return false, nil, fmt.Errorf("verify the indexed result of work key %s: %w", workKey, verr)
	}
	key := artifacts.ResultIndexKey(platform, workKey)
	if derr := store.Delete(ctx, key); derr != nil {
		return false, verr, fmt.Errorf("drop the damaged result index entry %s: %w", key, derr)
	}
	return false, verr, nil
}

// LookupAll is, per work key, its indexed result when every one of
// platforms has a good one measured with rule (Everywhere), nil otherwise.
// An empty work key has none.
func LookupAll(ctx context.Context, store artifacts.Store, platforms, workKeys []string, rule backend.StopRule) ([]*tuner.Result, error) {
	found := make([]*tuner.Result, len(workKeys))
	if len(platforms) == 0 {
		return found, nil
	}
	err := parallel.ForEach(ctx, len(workKeys), 8, func(ctx context.Context, i int) error {
		res, err := Everywhere(ctx, store, platforms, workKeys[i], rule)
		found[i] = res
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// Everywhere is the indexed result of workKey on platforms[0] when every
// platform has a good one measured with rule (Measured; nil otherwise) and
// its winner's engine is in the store.
func Everywhere(ctx context.Context, store artifacts.Store, platforms []string, workKey string, rule backend.StopRule) (*tuner.Result, error) {
	if workKey == "" {
		return nil, nil
	}
	var first *tuner.Result
	for _, p := range platforms {
		var r tuner.Result
		err := artifacts.GetJSON(ctx, store, artifacts.ResultIndexKey(p, workKey), &r)
		if errors.Is(err, artifacts.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("look work key %s up on %s: %w", shortKey(workKey), p, err)
		}
		if !r.OK() || r.Winner.Engine == nil || !Measured(&r, rule) {
			return nil, nil
		}
		if first == nil {
			first = &r
		}
	}
	// The winner's engine must be there with its size: one Stat, as
	// finalize checks a state's engines (VerifyStateBlobs), not a re-hash.
	// Reading every engine of the fleet back each night would make the
	// unchanged nightly cost a transfer of all its engines (TensorRT's run
	// to gigabytes); the content was verified when it was uploaded, and
	// fetch verifies every byte it deploys. A missing or resized engine
	// leaves the graph to a worker, which re-hashes, drops the entry and
	// tunes again.
	e := first.Winner.Engine
	info, err := store.Stat(ctx, artifacts.BlobKey(e.SHA256))
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("check the engine of work key %s: %w", shortKey(workKey), err)
	case info.Size != e.Size:
		return nil, nil
	}
	return first, nil
}

// shortKey is a work key cut for messages.
func shortKey(k string) string { return k[:min(len(k), 12)] }
