package storegc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// The runs: which runs the collection keeps (the newest KeepRuns final
// runs of each model and target, those finished within OlderThan, every
// run a latest.json names, every run not known to be final) and which it
// removes with their objects.

// runInfo is what the collection knows of one run in the store.
type runInfo struct {
	id, model, target string
	keys              []string
	hasSpec, hasState bool
	submitted         time.Time // run.json's submitted_at: what "newest" means
	when              time.Time // finished (state.json's time), else submitted
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
