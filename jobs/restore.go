package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// The store is the record of truth of a run; Redis only keeps its moving
// parts. A Redis restarted without persistence (or a flushed one) loses the
// run's record while run.json, the graphs' results and maybe state.json are
// in the store. Restore rebuilds the record from them, so that `status`
// still answers, the reconciler can re-enqueue what is pending, and attempt
// numbers go on from the highest stored one (an attempt's result key is
// never written twice).

// restoreScript creates a run's record, as createScript does, from the
// statuses the store gave, unless the run exists. ARGV: the run hash's
// field/value pairs count (n), the pairs, then graph, status, attempts
// triples; a graph whose status is pending joins the pending set.
var restoreScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local n = tonumber(ARGV[1])
for i = 2, 1 + 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
for i = 2 + 2 * n, #ARGV, 4 do
  local g = ARGV[i]
  redis.call('HSET', KEYS[3], g, ARGV[i + 1])
  if ARGV[i + 2] == 'pending' then redis.call('SADD', KEYS[2], g) end
  if tonumber(ARGV[i + 3]) > 0 then redis.call('HSET', KEYS[4], g, ARGV[i + 3]) end
end
return 1
`)

// Restore rebuilds a run's Redis record from the store. It returns false,
// changing nothing, when Redis has the run already, and an error wrapping
// ErrNoRun when the store has no run.json for it either.
func Restore(ctx context.Context, runs *Runs, store artifacts.Store, run string) (bool, error) {
	var spec RunSpec
	if err := artifacts.GetJSON(ctx, store, artifacts.RunKey(run), &spec); err != nil {
		if errors.Is(err, artifacts.ErrNotExist) {
			return false, fmt.Errorf("%w %q (neither Redis nor %s has it)", ErrNoRun, run, store)
		}
		return false, fmt.Errorf("restore run %s: %w", run, err)
	}
	var ms *state.State
	var s state.State
	switch err := artifacts.GetJSON(ctx, store, artifacts.StateKey(run), &s); {
	case err == nil:
		ms = &s
	case !errors.Is(err, artifacts.ErrNotExist):
		return false, fmt.Errorf("restore run %s: %w", run, err)
	}
	attempts, err := storedAttempts(ctx, store, run)
	if err != nil {
		return false, err
	}
	graphs, platform, err := restoredGraphs(ctx, store, &spec, ms)
	if err != nil {
		return false, err
	}
	now := time.Now().UTC()
	fields := map[string]string{
		"status": RunRunning, "model": spec.Model, "target": spec.Target, "total": strconv.Itoa(len(spec.Manifest.Graphs)),
		"finalizations": "0", "created_at": spec.SubmittedAt.Format(time.RFC3339Nano), "restored": now.Format(time.RFC3339Nano),
	}
	counts := map[string]int{}
	for _, g := range graphs {
		counts[g.st.Status]++
	}
	fields["done"], fields["failed"], fields["cancelled"] = strconv.Itoa(counts[GraphDone]), strconv.Itoa(counts[GraphFailed]), strconv.Itoa(counts[GraphCancelled])
	if platform != "" {
		fields["platform"] = platform
	}
	if ms != nil {
		// Finalized before Redis lost it: the state says how it ended.
		fields["status"], fields["state_key"], fields["finalizations"] = ms.Status, artifacts.StateKey(run), "1"
		fields["reason"] = strings.Join(ms.Reasons, "; ")
		fields["finished_at"] = ms.Provenance.FinalizedAt.Format(time.RFC3339Nano)
	}
	args := []any{len(fields)}
	for k, v := range fields {
		args = append(args, k, v)
	}
	for _, g := range graphs {
		b, _ := json.Marshal(g.st)
		args = append(args, g.name, string(b), g.st.Status, attempts[g.name])
	}
	n, err := restoreScript.Run(ctx, runs.rdb, []string{runKey(run), pendingKey(run), graphsKey(run), attemptsKey(run)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("restore run %s: %w", run, err)
	}
	if n == 0 {
		return false, nil
	}
	if err := runs.index(ctx, run, spec.Model, spec.SubmittedAt); err != nil {
		return true, err
	}
	if ms != nil {
		// A finished run rebuilt for a reader is a cache of the store.
		runs.unrun(ctx, run)
		ttl := restoredRetention
		if keep := runs.keep(); keep > 0 && keep < ttl {
			ttl = keep
		}
		for _, k := range runKeys(run) {
			runs.rdb.Expire(ctx, k, ttl)
		}
	}
	return true, nil
}

type restoredGraph struct {
	name string
	st   GraphStatus
}

// restoredGraphs gives each graph's status: from state.json when the run
// was finalized, else from the result.json the attempt that completed it
// published (a graph without one is pending). It also returns the
// platform the results were tuned on (the run's binding).
func restoredGraphs(ctx context.Context, store artifacts.Store, spec *RunSpec, ms *state.State) ([]restoredGraph, string, error) {
	var out []restoredGraph
	platform := ""
	if ms != nil {
		platform = ms.Platform
		for _, sg := range ms.Graphs {
			st := GraphStatus{Status: GraphDone, Winner: sg.Candidate, ResultKey: sg.ResultKey, Worker: sg.Worker, Bench: history.BenchOf(sg.Selection, sg.Benchmarks)}
			if sg.Failure != nil {
				st = GraphStatus{Status: GraphFailed, Class: string(sg.Failure.Class), Message: sg.Failure.Message, ResultKey: sg.ResultKey}
				if ms.Status == RunCancelled && sg.Failure.Class == "cancelled" {
					st.Status = GraphCancelled
				}
			}
			out = append(out, restoredGraph{sg.Name, st})
		}
		return out, platform, nil
	}
	for _, g := range spec.Manifest.Graphs {
		key := artifacts.GraphResultKey(spec.Run, g.Name)
		var res tuner.Result
		err := artifacts.GetJSON(ctx, store, key, &res)
		switch {
		case errors.Is(err, artifacts.ErrNotExist):
			out = append(out, restoredGraph{g.Name, GraphStatus{Status: GraphPending}})
			continue
		case err != nil:
			return nil, "", fmt.Errorf("restore run %s graph %s: %w", spec.Run, g.Name, err)
		}
		if platform == "" {
			platform = res.Platform
		}
		st := GraphStatus{Status: GraphDone, ResultKey: key, Worker: res.Worker}
		if res.OK() {
			st.Winner, st.Reason, st.Bench = res.Winner.Candidate, res.Winner.Reason, history.ResultBench(&res)
		} else {
			st.Status = GraphFailed
			if res.Failure != nil {
				st.Class, st.Message = string(res.Failure.Class), res.Failure.Message
			}
		}
		out = append(out, restoredGraph{g.Name, st})
	}
	return out, platform, nil
}

// storedAttempts is the highest attempt number stored per graph
// (runs/<run>/graphs/<graph>/attempts/<n>/result.json).
func storedAttempts(ctx context.Context, store artifacts.Store, run string) (map[string]int, error) {
	prefix := "runs/" + run + "/graphs/"
	keys, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("restore run %s: list attempts: %w", run, err)
	}
	out := map[string]int{}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		graph, tail, ok := strings.Cut(rest, "/attempts/")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(tail, "/")
		if n, err := strconv.Atoi(num); err == nil && n > out[graph] {
			out[graph] = n
		}
	}
	return out, nil
}
