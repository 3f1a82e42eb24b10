package runstate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The listing: every run, each model's and each status's, and each
// model's per status, sorted by creation time for `producer runs`, and the
// runs not yet final for the reconciler. Listings lie outside a run's hash
// slot; a model's listings share one slot (the model is their hash tag).
// A run's own keys expire Retention after it ends, and its listings are
// trimmed then.

// DefaultRetention is how long a finished run's bookkeeping stays in Redis.
const DefaultRetention = 30 * 24 * time.Hour

// restoredRetention is how long the record of a finished run rebuilt from
// the store (a `status` of an expired run) stays: it is a cache.
const restoredRetention = 24 * time.Hour

const (
	indexKey   = keyPrefix + "runs"    // every run, by creation time
	runningKey = keyPrefix + "running" // runs not yet final, by creation time
	// modelsKey lists every model with runs, by its newest run's creation
	// time: a search by part of a name reads the names, never the history
	// (models are few beside their runs).
	modelsKey = keyPrefix + "runs:models"
)

func modelIndexKey(model string) string   { return keyPrefix + "runs:model:{" + model + "}" }
func statusIndexKey(status string) string { return keyPrefix + "runs:status:" + status }

// modelStatusIndexKey lists a model's runs with one status (running
// included), so that `runs --model M --status S` reads a page of its own
// rather than every run of M: its cost is the page's, not the history's.
func modelStatusIndexKey(model, status string) string {
	return keyPrefix + "runs:model:{" + model + "}:status:" + status
}

// targetIndexKey lists a target class's runs, and targetStatusIndexKey
// its runs with one status, so that `runs --target T` reads a page of its
// own rather than every run until the page is full: a class whose runs
// are not the newest (one retired, or one that runs rarely) cost the
// whole history's reading (issue 35). The class is their hash tag.
func targetIndexKey(target string) string { return keyPrefix + "runs:target:{" + target + "}" }

func targetStatusIndexKey(target, status string) string {
	return keyPrefix + "runs:target:{" + target + "}:status:" + status
}

// targetsIndexedKey marks that the runs listed before the target listings
// existed were added to them (indexTargets), once.
const targetsIndexedKey = keyPrefix + "runs:targets-indexed"

// legacyModelIndexKey is where a model's runs were listed before the
// per-status listings (no hash tag): List moves it once (migrateModel).
func legacyModelIndexKey(model string) string { return keyPrefix + "runs:model:" + model }

// finalStatuses are the statuses a run ends in, each with its listings.
var finalStatuses = []string{RunDone, RunFailed, RunCancelled}

func (r *Runs) keep() time.Duration {
	if r.Retention == 0 {
		return DefaultRetention
	}
	return r.Retention
}

// index lists a new (or restored) run for `producer runs` and, until it is
// final, for the reconciler.
func (r *Runs) index(ctx context.Context, run, model, target string, created time.Time) error {
	z := redis.Z{Score: float64(created.UnixNano()), Member: run}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, indexKey, z)
		p.ZAdd(ctx, modelIndexKey(model), z)
		p.ZAdd(ctx, modelStatusIndexKey(model, RunRunning), z)
		p.ZAdd(ctx, targetIndexKey(target), z)
		p.ZAdd(ctx, targetStatusIndexKey(target, RunRunning), z)
		p.ZAdd(ctx, runningKey, z)
		p.ZAddGT(ctx, modelsKey, redis.Z{Score: z.Score, Member: model})
		return nil
	})
	if err != nil {
		return fmt.Errorf("index run %s: %w", run, err)
	}
	return nil
}

// finished moves a run from the running index to its status's, and trims
// the entries past retention from the indexes it is in.
func (r *Runs) finished(ctx context.Context, run, status string) {
	created, err := r.rdb.ZScore(ctx, runningKey, run).Result()
	var model, target string
	vals, merr := r.rdb.HMGet(ctx, runKey(run), "model", "target").Result()
	if merr == nil {
		model, _ = vals[0].(string)
		target, _ = vals[1].(string)
	}
	if err != nil {
		created = float64(time.Now().UnixNano())
	}
	cut := "-inf"
	if keep := r.keep(); keep > 0 {
		cut = "(" + strconv.FormatInt(time.Now().Add(-keep).UnixNano(), 10)
	}
	z := redis.Z{Score: created, Member: run}
	r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, runningKey, run)
		p.ZAdd(ctx, statusIndexKey(status), z)
		if model != "" {
			p.ZRem(ctx, modelStatusIndexKey(model, RunRunning), run)
			p.ZAdd(ctx, modelStatusIndexKey(model, status), z)
		}
		if target != "" {
			p.ZRem(ctx, targetStatusIndexKey(target, RunRunning), run)
			p.ZAdd(ctx, targetStatusIndexKey(target, status), z)
		}
		if cut != "-inf" {
			// Every final status's listings, not only this run's: a
			// model whose last failure is a month old must not keep it
			// listed until its next failure.
			p.ZRemRangeByScore(ctx, indexKey, "-inf", cut)
			for _, s := range finalStatuses {
				p.ZRemRangeByScore(ctx, statusIndexKey(s), "-inf", cut)
			}
			if model != "" {
				p.ZRemRangeByScore(ctx, modelIndexKey(model), "-inf", cut)
				for _, s := range finalStatuses {
					p.ZRemRangeByScore(ctx, modelStatusIndexKey(model, s), "-inf", cut)
				}
			}
			if target != "" {
				p.ZRemRangeByScore(ctx, targetIndexKey(target), "-inf", cut)
				for _, s := range finalStatuses {
					p.ZRemRangeByScore(ctx, targetStatusIndexKey(target, s), "-inf", cut)
				}
			}
		}
		return nil
	})
}

// UnmarkRunning drops a run from the running indexes (it is final, or
// unknown). The model's running listing is reached through the run's
// record; a run Redis no longer holds is dropped from it when List meets
// it.
func (r *Runs) UnmarkRunning(ctx context.Context, run string) {
	r.rdb.ZRem(ctx, runningKey, run)
	if vals, err := r.rdb.HMGet(ctx, runKey(run), "model", "target").Result(); err == nil {
		if model, ok := vals[0].(string); ok {
			r.rdb.ZRem(ctx, modelStatusIndexKey(model, RunRunning), run)
		}
		if target, ok := vals[1].(string); ok {
			r.rdb.ZRem(ctx, targetStatusIndexKey(target, RunRunning), run)
		}
	}
}

// indexTargets adds the runs listed before the target listings existed to
// them, once (the mark says it was done): each run's target and status
// read from its record, in one round trip per listBatch runs. A run whose
// record expired is left out, as List would drop it.
func (r *Runs) indexTargets(ctx context.Context) error {
	switch n, err := r.rdb.Exists(ctx, targetsIndexedKey).Result(); {
	case err != nil:
		return fmt.Errorf("list runs by target: %w", err)
	case n > 0:
		return nil
	}
	zs, err := r.rdb.ZRangeWithScores(ctx, indexKey, 0, -1).Result()
	if err != nil {
		return fmt.Errorf("list runs by target: %w", err)
	}
	for len(zs) > 0 {
		batch := zs[:min(len(zs), listBatch)]
		zs = zs[len(batch):]
		vals := make([]*redis.SliceCmd, len(batch))
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, z := range batch {
				vals[i] = p.HMGet(ctx, runKey(fmt.Sprint(z.Member)), "target", "status")
			}
			return nil
		}); err != nil {
			return fmt.Errorf("list runs by target: %w", err)
		}
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, z := range batch {
				v, err := vals[i].Result()
				if err != nil {
					continue
				}
				target, ok1 := v[0].(string)
				status, ok2 := v[1].(string)
				if !ok1 || !ok2 || target == "" {
					continue // expired
				}
				p.ZAdd(ctx, targetIndexKey(target), z)
				p.ZAdd(ctx, targetStatusIndexKey(target, status), z)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("list runs by target: %w", err)
		}
	}
	return r.rdb.Set(ctx, targetsIndexedKey, "1", 0).Err()
}

// migrateModel moves a model's listing from its pre-hash-tag key into the
// model's listings (by status too), once: the legacy key is deleted after.
// A run whose record expired is left out, as List would drop it.
func (r *Runs) migrateModel(ctx context.Context, model string) error {
	old := legacyModelIndexKey(model)
	zs, err := r.rdb.ZRangeWithScores(ctx, old, 0, -1).Result()
	if err != nil || len(zs) == 0 {
		return err
	}
	statuses := make([]*redis.StringCmd, len(zs))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			statuses[i] = p.HGet(ctx, runKey(fmt.Sprint(z.Member)), "status")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("move the listing of model %s: %w", model, err)
	}
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			st, err := statuses[i].Result()
			if err != nil {
				continue // expired
			}
			p.ZAdd(ctx, modelIndexKey(model), z)
			p.ZAdd(ctx, modelStatusIndexKey(model, st), z)
		}
		p.Del(ctx, old)
		return nil
	})
	if err != nil {
		return fmt.Errorf("move the listing of model %s: %w", model, err)
	}
	return nil
}

// MarkRunning lists a run Redis knows as running (one recorded before the
// running index existed).
func (r *Runs) MarkRunning(ctx context.Context, run string) {
	r.rdb.ZAddNX(ctx, runningKey, redis.Z{Score: float64(time.Now().UnixNano()), Member: run})
}

// Running lists the runs not known to be final (the reconciler's work),
// oldest first.
func (r *Runs) Running(ctx context.Context) ([]string, error) {
	ids, err := r.rdb.ZRange(ctx, runningKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	return ids, nil
}

// ListOptions filter and page `producer runs`.
type ListOptions struct {
	Model string // only this model's runs
	// ModelLike: only runs whose model contains it; a leading ^ anchors
	// it at the start (a prefix). When it is the whole name of a model
	// with runs, it is that model (read from the model's index); otherwise
	// the models whose names match are found among the names of models
	// with runs, and their indexes read: either way in time independent
	// of the history (an unknown name reads only the names).
	ModelLike string
	Status    string // only runs with this status
	Target    string // only runs for this target class
	Limit     int    // at most this many (0: all)
	// Before pages: only runs created before it (the CreatedAt of the
	// last run of the previous page).
	Before time.Time
	// Graphs: list every run with its graphs. Without it a final run
	// whose summary finalize recorded is listed without them (Graphs
	// empty; Summary, the counts and the rest of its record as ever), so
	// a page costs the same whatever its runs' size.
	Graphs bool
}

// List returns runs newest first, read from the index that fits the
// filter: its cost is that of the page, not of the history, and a page's
// records are read in one round trip. A run whose record expired is
// dropped from the index as it is met.
func (r *Runs) List(ctx context.Context, o ListOptions) ([]RunStatus, error) {
	if o.Model == "" && o.ModelLike != "" && !strings.HasPrefix(o.ModelLike, "^") {
		// One key per EXISTS: the legacy key is in another cluster slot.
		var n int64
		for _, k := range []string{modelIndexKey(o.ModelLike), legacyModelIndexKey(o.ModelLike)} {
			e, err := r.rdb.Exists(ctx, k).Result()
			if err != nil {
				return nil, fmt.Errorf("list runs: %w", err)
			}
			if n += e; n > 0 {
				break
			}
		}
		if n > 0 { // a model's whole name: exactly it, from its index
			o.Model, o.ModelLike = o.ModelLike, ""
		}
	}
	if o.Model == "" && o.ModelLike != "" {
		models, indexed, err := r.modelsLike(ctx, o.ModelLike)
		if err != nil {
			return nil, err
		}
		if indexed {
			return r.listModels(ctx, models, o)
		}
	}
	idx := indexKey
	switch {
	case o.Model != "":
		if err := r.migrateModel(ctx, o.Model); err != nil {
			return nil, err
		}
		idx = modelIndexKey(o.Model)
		if o.Status != "" {
			idx = modelStatusIndexKey(o.Model, o.Status)
		}
	case o.Target != "":
		if err := r.indexTargets(ctx); err != nil {
			return nil, err
		}
		idx = targetIndexKey(o.Target)
		if o.Status != "" {
			idx = targetStatusIndexKey(o.Target, o.Status)
		}
	case o.Status == RunRunning:
		idx = runningKey
	case o.Status != "":
		idx = statusIndexKey(o.Status)
	}
	max := "+inf"
	if !o.Before.IsZero() {
		max = "(" + strconv.FormatInt(o.Before.UnixNano(), 10)
	}
	page := int64(o.Limit)
	if page <= 0 {
		page = math.MaxInt32
	}
	var out []RunStatus
	for offset := int64(0); ; {
		ids, err := r.rdb.ZRevRangeByScore(ctx, idx, &redis.ZRangeBy{Max: max, Min: "-inf", Offset: offset, Count: page}).Result()
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		n := int64(len(ids))
		for len(ids) > 0 {
			batch := ids[:min(len(ids), listBatch)]
			ids = ids[len(batch):]
			sts, errs := r.listAll(ctx, batch, o.Graphs)
			for i, id := range batch {
				st, err := sts[i], errs[i]
				if errors.Is(err, ErrNoRun) {
					r.rdb.ZRem(ctx, idx, id) // expired: the store still has it
					offset--
					continue
				}
				if err != nil {
					return nil, err
				}
				if (o.Model == "" || st.Model == o.Model) && (o.Status == "" || st.Status == o.Status) && (o.Target == "" || st.Target == o.Target) &&
					ModelLike(st.Model, o.ModelLike) {
					out = append(out, st)
					if o.Limit > 0 && len(out) == o.Limit {
						return out, nil
					}
				}
			}
		}
		if n < page {
			return out, nil
		}
		offset += n
	}
}

// Models lists the names of models with runs in Redis, newest run
// first: what a search by part of a name reads, and what a did-you-mean
// chooses from.
func (r *Runs) Models(ctx context.Context) ([]string, error) {
	names, err := r.rdb.ZRevRange(ctx, modelsKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	return names, nil
}

// modelsLike are the models with runs whose names match pattern;
// indexed is false when Redis has no list of model names (runs created
// before it: List then reads the index of all runs, as it did).
func (r *Runs) modelsLike(ctx context.Context, pattern string) (models []string, indexed bool, err error) {
	names, err := r.Models(ctx)
	if err != nil || len(names) == 0 {
		return nil, false, err
	}
	for _, m := range names {
		if ModelLike(m, pattern) {
			models = append(models, m)
		}
	}
	return models, true, nil
}

// listModels is List over several models' indexes: each model's page,
// merged newest first and cut to the limit. A model whose listing has
// gone (its runs expired) leaves the names.
func (r *Runs) listModels(ctx context.Context, models []string, o ListOptions) ([]RunStatus, error) {
	var out []RunStatus
	for _, m := range models {
		mo := o
		mo.Model, mo.ModelLike = m, ""
		list, err := r.List(ctx, mo)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 && o.Status == "" && o.Before.IsZero() {
			if n, err := r.rdb.Exists(ctx, modelIndexKey(m)).Result(); err == nil && n == 0 {
				r.rdb.ZRem(ctx, modelsKey, m)
			}
		}
		out = append(out, list...)
	}
	slices.SortStableFunc(out, func(a, b RunStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out, nil
}

// listBatch is how many records List reads in one round trip: a page
// (--limit) at once, a listing of every run (no limit) in parts of this
// size, so that one pipeline's replies stay a few megabytes.
const listBatch = 500

// ModelLike reports whether model matches a ListOptions.ModelLike
// pattern: contains it, or with a leading ^ starts with the rest.
func ModelLike(model, pattern string) bool {
	if p, ok := strings.CutPrefix(pattern, "^"); ok {
		return strings.HasPrefix(model, p)
	}
	return strings.Contains(model, pattern)
}

// Counts are how many runs Redis indexes per status: the running ones,
// and the final ones still within Retention (what `producer runs` can
// list), read from the indexes in one round trip.
func (r *Runs) Counts(ctx context.Context) (map[string]int64, error) {
	statuses := []string{RunRunning, RunDone, RunFailed, RunCancelled}
	cmds := make([]*redis.IntCmd, len(statuses))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range statuses {
			key := statusIndexKey(s)
			if s == RunRunning {
				key = runningKey
			}
			cmds[i] = p.ZCard(ctx, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	out := make(map[string]int64, len(statuses))
	for i, s := range statuses {
		out[s] = cmds[i].Val()
	}
	return out, nil
}
