package storegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
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

// sha256Hex finds digests in a root, however it spells them.
var sha256Hex = regexp.MustCompile(`[0-9a-f]{64}`)

// runInfo is what the collection knows of one run in the store.
type runInfo struct {
	id, model, target string
	keys              []string
	hasSpec, hasState bool
	submitted         time.Time // run.json's submitted_at: what "newest" means
	when              time.Time // finished (state.json's time), else submitted
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

// rewritten says whether a root key is overwritten in place (so a second
// read can see what the first did not): latest.json, the result index and
// negative cache, nightly summaries. History entries are written once.
func rewritten(key string) bool {
	return strings.HasPrefix(key, "models/") && strings.HasSuffix(key, "/latest.json") ||
		strings.HasPrefix(key, "results/") || strings.HasPrefix(key, "nightly/")
}

// runOf returns the run id of a key under runs/.
func runOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "runs/")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "/")
	return id, ok && id != ""
}

// readRuns groups the keys under runs/ by run and reads what each run's
// run.json and state.json say of it.
func readRuns(ctx context.Context, s artifacts.Store, keys []string) (map[string]*runInfo, error) {
	runs := map[string]*runInfo{}
	for _, k := range keys {
		id, ok := runOf(k)
		if !ok {
			continue
		}
		r := runs[id]
		if r == nil {
			r = &runInfo{id: id}
			runs[id] = r
		}
		r.keys = append(r.keys, k)
		switch k {
		case artifacts.RunKey(id):
			r.hasSpec = true
		case artifacts.StateKey(id):
			r.hasState = true
		}
	}
	for _, r := range runs {
		var doc struct {
			Model       string    `json:"model"`
			Target      string    `json:"target"`
			SubmittedAt time.Time `json:"submitted_at"`
		}
		if r.hasSpec {
			if err := readJSON(ctx, s, artifacts.RunKey(r.id), &doc); err != nil {
				return nil, err
			}
			r.model, r.target, r.submitted, r.when = doc.Model, doc.Target, doc.SubmittedAt, doc.SubmittedAt
		}
		if r.hasState {
			info, err := s.Stat(ctx, artifacts.StateKey(r.id))
			if err != nil && !errors.Is(err, artifacts.ErrNotExist) {
				return nil, fmt.Errorf("stat %s: %w", artifacts.StateKey(r.id), err)
			}
			if err == nil {
				r.when = info.ModTime
			}
			if !r.hasSpec {
				// A run cut short by an earlier sweep (run.json goes
				// before state.json): state.json still names it.
				if err := readJSON(ctx, s, artifacts.StateKey(r.id), &doc); err != nil {
					return nil, err
				}
				r.model, r.target = doc.Model, doc.Target
				r.submitted = r.when
			}
		}
	}
	return runs, nil
}

// latestRuns returns the runs every latest.json names: what deploy tooling
// resolves today is never removed.
func latestRuns(ctx context.Context, s artifacts.Store, keys []string) (map[string]bool, error) {
	named := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, "models/") || !strings.HasSuffix(k, "/latest.json") {
			continue
		}
		var l struct {
			Run string `json:"run"`
		}
		if err := readJSON(ctx, s, k, &l); err != nil {
			return nil, err
		}
		named[l.Run] = true
	}
	return named, nil
}

// chooseRuns decides which runs go and returns them by id.
func chooseRuns(ctx context.Context, s artifacts.Store, o Options, now time.Time, runs map[string]*runInfo, named map[string]bool, plan *Plan) (map[string]bool, error) {
	removed := map[string]bool{}
	groups := map[string][]*runInfo{}
	for _, r := range runs {
		if !r.hasSpec && !r.hasState {
			if err := remnant(ctx, s, o, now, r, named, plan, removed); err != nil {
				return nil, err
			}
			continue
		}
		final, err := isFinal(ctx, o, r)
		if err != nil {
			return nil, err
		}
		if !final {
			plan.NotFinalRuns++
			continue
		}
		g := r.model + "\x00" + r.target
		groups[g] = append(groups[g], r)
	}
	for _, g := range groups {
		// Newest submission first; ties by id so the choice is
		// deterministic.
		slices.SortFunc(g, func(a, b *runInfo) int {
			if c := b.submitted.Compare(a.submitted); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		for i, r := range g {
			if i < o.KeepRuns || named[r.id] || now.Sub(r.when) < o.OlderThan {
				plan.KeptRuns++
				continue
			}
			objs, _, err := stats(ctx, s, r.keys)
			if err != nil {
				return nil, err
			}
			remove(plan, removed, r, objs)
		}
	}
	slices.SortFunc(plan.Runs, func(a, b Run) int { return strings.Compare(a.Run, b.Run) })
	return removed, nil
}

// remnant judges a run directory with neither run.json nor state.json:
// what a late duplicate attempt (a worker taken for dead that was only
// slow) writes into a run already removed, or a sweep cut short leaves. A
// submission writes run.json before any task can write there, so such a
// directory is never a run starting. It goes once every object in it is
// older than the grace period, unless Redis says the run is still going.
func remnant(ctx context.Context, s artifacts.Store, o Options, now time.Time, r *runInfo, named map[string]bool, plan *Plan, removed map[string]bool) error {
	if o.Final != nil {
		known, final, err := o.Final(ctx, r.id)
		if err != nil {
			return fmt.Errorf("is run %s final: %w", r.id, err)
		}
		if known && !final {
			plan.NotFinalRuns++
			return nil
		}
	}
	objs, newest, err := stats(ctx, s, r.keys)
	if err != nil {
		return err
	}
	if named[r.id] || !newest.Before(now.Add(-o.Grace)) {
		plan.KeptRuns++
		return nil
	}
	r.when = newest
	remove(plan, removed, r, objs)
	return nil
}

// stats describes keys (those gone since the listing are left out) and
// returns the newest modification time among them.
func stats(ctx context.Context, s artifacts.Store, keys []string) ([]Object, time.Time, error) {
	var objs []Object
	var newest time.Time
	for _, k := range keys {
		info, err := s.Stat(ctx, k)
		if errors.Is(err, artifacts.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("stat %s: %w", k, err)
		}
		objs = append(objs, Object{Key: k, Size: info.Size})
		if info.ModTime.After(newest) {
			newest = info.ModTime
		}
	}
	return objs, newest, nil
}

// remove adds a run and its objects to the plan.
func remove(plan *Plan, removed map[string]bool, r *runInfo, objs []Object) {
	run := Run{Run: r.id, Model: r.model, Target: r.target, Finished: r.when, Objects: objs}
	for _, obj := range objs {
		run.Bytes += obj.Size
	}
	orderForDelete(r.id, run.Objects)
	plan.Runs = append(plan.Runs, run)
	plan.Bytes += run.Bytes
	removed[r.id] = true
}

// orderForDelete puts run.json and then state.json last: a sweep cut short
// leaves a run that is still recognizably final (its state.json), so the
// next sweep finishes it.
func orderForDelete(run string, objs []Object) {
	rank := func(k string) int {
		switch k {
		case artifacts.RunKey(run):
			return 1
		case artifacts.StateKey(run):
			return 2
		}
		return 0
	}
	slices.SortStableFunc(objs, func(a, b Object) int { return rank(a.Key) - rank(b.Key) })
}

func isFinal(ctx context.Context, o Options, r *runInfo) (bool, error) {
	if o.Final != nil {
		known, final, err := o.Final(ctx, r.id)
		if err != nil {
			return false, fmt.Errorf("is run %s final: %w", r.id, err)
		}
		if known {
			return final, nil
		}
	}
	return r.hasState, nil
}

// markRoot reads one root document and marks every sha256 it mentions.
// Blobs, objects of removed runs and non-JSON objects (timing caches,
// checkpoint files) are not roots.
func markRoot(ctx context.Context, s artifacts.Store, key string, removed, marked, seen map[string]bool) error {
	if strings.HasPrefix(key, blobPrefix) || !strings.HasSuffix(key, ".json") {
		return nil
	}
	if id, ok := runOf(key); ok && removed[id] {
		return nil
	}
	b, err := artifacts.ReadObject(ctx, s, key, artifacts.MaxJSONSize)
	if errors.Is(err, artifacts.ErrNotExist) {
		return nil // removed since the listing
	}
	if err != nil {
		return fmt.Errorf("read root %s: %w", key, err)
	}
	seen[key] = true
	for _, h := range sha256Hex.FindAll(b, -1) {
		marked[string(h)] = true
	}
	return nil
}

// unmarkedOld returns the blobs no root marked that are older than cutoff.
func unmarkedOld(ctx context.Context, s artifacts.Store, blobs []string, marked map[string]bool, cutoff time.Time, plan *Plan) ([]Object, error) {
	var out []Object
	for _, k := range blobs {
		if marked[strings.TrimPrefix(k, blobPrefix)] {
			plan.MarkedBlobs++
			continue
		}
		info, err := s.Stat(ctx, k)
		if errors.Is(err, artifacts.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", k, err)
		}
		if !info.ModTime.Before(cutoff) {
			plan.YoungBlobs++
			continue
		}
		out = append(out, Object{Key: k, Size: info.Size})
	}
	return out, nil
}

func readJSON(ctx context.Context, s artifacts.Store, key string, v any) error {
	b, err := artifacts.ReadObject(ctx, s, key, artifacts.MaxJSONSize)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s in %s: %w", key, s, err)
	}
	return nil
}

// Sweep deletes what the plan found: each removed run's objects (state.json
// last), then the unmarked blobs. Before a blob goes it is looked at once
// more: one written again since the collection (a retry re-uploading the
// same bytes) is young and stays. It returns how many objects and bytes it
// removed.
func (p *Plan) Sweep(ctx context.Context, s artifacts.Store, o Options) (n int, bytes int64, err error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	for _, r := range p.Runs {
		for _, obj := range r.Objects {
			if err := s.Delete(ctx, obj.Key); err != nil {
				return n, bytes, fmt.Errorf("delete %s: %w", obj.Key, err)
			}
			n, bytes = n+1, bytes+obj.Size
		}
	}
	cutoff := now().Add(-o.Grace)
	for _, b := range p.Blobs {
		info, err := s.Stat(ctx, b.Key)
		if errors.Is(err, artifacts.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, bytes, fmt.Errorf("stat %s: %w", b.Key, err)
		}
		if !info.ModTime.Before(cutoff) {
			continue
		}
		if err := s.Delete(ctx, b.Key); err != nil {
			return n, bytes, fmt.Errorf("delete %s: %w", b.Key, err)
		}
		n, bytes = n+1, bytes+b.Size
	}
	return n, bytes, nil
}
