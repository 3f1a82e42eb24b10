package storegc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// DefaultGrace is how young a blob must be for the sweep to leave it
// whatever references it: longer than any upload-to-manifest gap.
const DefaultGrace = time.Hour

// DefaultKeepRuns is how many of the newest final runs of each model and
// target are kept whatever their age.
const DefaultKeepRuns = 5

const blobPrefix = "blobs/sha256/"

// FinalFunc asks the run bookkeeping (Redis) whether a run is final. known
// is false when it has no record of the run (never had one, or its
// retention expired); the store then decides (a state.json).
type FinalFunc func(ctx context.Context, run string) (known, final bool, err error)

// Options says what to keep.
type Options struct {
	// KeepRuns newest final runs of each model and target are kept.
	KeepRuns int
	// OlderThan: a run is removed only when it finished at least this long
	// ago (0: any age).
	OlderThan time.Duration
	// Grace: blobs modified less than this long ago are never swept.
	Grace time.Duration
	// Final asks Redis whether a run is final; nil: a run with a
	// state.json is final.
	Final FinalFunc
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Object is one object the sweep removes.
type Object struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// Run is a run the sweep removes, with its objects.
type Run struct {
	Run      string    `json:"run"`
	Model    string    `json:"model"`
	Target   string    `json:"target"`
	Finished time.Time `json:"finished"`
	Objects  []Object  `json:"objects"`
	Bytes    int64     `json:"bytes"`
}

// Plan is what a collection found: what to remove and why the rest stays.
type Plan struct {
	Runs  []Run    `json:"runs"`
	Blobs []Object `json:"blobs"`
	// Bytes is the total the sweep frees.
	Bytes int64 `json:"bytes"`

	KeptRuns     int `json:"kept_runs"`
	NotFinalRuns int `json:"not_final_runs"`
	MarkedBlobs  int `json:"marked_blobs"`
	YoungBlobs   int `json:"young_blobs"`
	Roots        int `json:"roots"`
}

// Collect marks and decides; it deletes nothing.
func Collect(ctx context.Context, s artifacts.Store, o Options) (*Plan, error) {
	if o.KeepRuns < 0 || o.OlderThan < 0 || o.Grace < 0 {
		return nil, fmt.Errorf("storegc: keep-runs, older-than and grace must not be negative")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	start := now()
	// Blobs are listed before any root is read: a blob written after this
	// list is not a candidate at all, and one written before it is either
	// named by a root read below or old enough to judge by its age.
	blobs, err := s.List(ctx, blobPrefix)
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list the store: %w", err)
	}
	runs, err := readRuns(ctx, s, keys)
	if err != nil {
		return nil, err
	}
	named, err := latestRuns(ctx, s, keys)
	if err != nil {
		return nil, err
	}
	plan := &Plan{}
	removed, err := chooseRuns(ctx, s, o, start, runs, named, plan)
	if err != nil {
		return nil, err
	}
	marked := map[string]bool{}
	seen := map[string]bool{}
	for _, k := range keys {
		if err := markRoot(ctx, s, k, removed, marked, seen); err != nil {
			return nil, err
		}
	}
	candidates, err := unmarkedOld(ctx, s, blobs, marked, start.Add(-o.Grace), plan)
	if err != nil {
		return nil, err
	}
	// Second pass: roots written while this ran (a run finalizing now
	// publishes results and a state that name blobs), and every
	// latest.json and index entry again, since those are rewritten in place.
	again, err := s.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list the store: %w", err)
	}
	for _, k := range again {
		if seen[k] && !rewritten(k) {
			continue
		}
		delete(seen, k)
		if err := markRoot(ctx, s, k, removed, marked, seen); err != nil {
			return nil, err
		}
	}
	for _, b := range candidates {
		if marked[strings.TrimPrefix(b.Key, blobPrefix)] {
			plan.MarkedBlobs++
			continue
		}
		plan.Blobs = append(plan.Blobs, b)
		plan.Bytes += b.Size
	}
	plan.Roots = len(seen)
	return plan, nil
}
