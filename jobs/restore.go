package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/runstate"
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

// Restore rebuilds a run's Redis record from the store. It returns false,
// changing nothing, when Redis has the run already, and an error wrapping
// ErrNoRun when the store has no run.json for it either.
func Restore(ctx context.Context, runs *runstate.Runs, store artifacts.Store, run string) (bool, error) {
	var spec RunSpec
	if err := artifacts.GetJSON(ctx, store, artifacts.RunKey(run), &spec); err != nil {
		if errors.Is(err, artifacts.ErrNotExist) {
			return false, fmt.Errorf("%w %q (neither Redis nor %s has it)", runstate.ErrNoRun, run, store)
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
	rec := runstate.RestoredRun{
		Run: run, Model: spec.Model, Target: spec.Target, Platform: platform, Total: len(spec.Manifest.Graphs),
		CreatedAt: spec.SubmittedAt, Nightly: spec.Nightly,
	}
	if ms != nil {
		// Finalized before Redis lost it: the state says how it ended.
		rec.Final, rec.Status, rec.StateKey, rec.Reason = true, ms.Status, artifacts.StateKey(run), strings.Join(ms.Reasons, "; ")
		rec.FinishedAt = ms.Provenance.FinalizedAt
	}
	for _, g := range graphs {
		rec.Graphs = append(rec.Graphs, runstate.RestoredGraph{Name: g.name, Status: g.st, Attempts: attempts[g.name]})
	}
	return runs.Restore(ctx, rec)
}

type restoredGraph struct {
	name string
	st   runstate.GraphStatus
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
			st := runstate.GraphStatus{Status: runstate.GraphDone, Winner: sg.Candidate, ResultKey: sg.ResultKey, Worker: sg.Worker, Bench: history.BenchOf(sg.Selection, sg.Benchmarks)}
			if sg.Failure != nil {
				st = runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(sg.Failure.Class), Message: sg.Failure.Message, ResultKey: sg.ResultKey}
				if ms.Status == runstate.RunCancelled && sg.Failure.Class == "cancelled" {
					st.Status = runstate.GraphCancelled
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
			out = append(out, restoredGraph{g.Name, runstate.GraphStatus{Status: runstate.GraphPending}})
			continue
		case err != nil:
			return nil, "", fmt.Errorf("restore run %s graph %s: %w", spec.Run, g.Name, err)
		}
		if platform == "" {
			platform = res.Platform
		}
		st := runstate.GraphStatus{Status: runstate.GraphDone, ResultKey: key, Worker: res.Worker}
		if res.OK() {
			st.Winner, st.Reason, st.Bench = res.Winner.Candidate, res.Winner.Reason, history.ResultBench(&res)
			st.Speedup, st.ReusedFrom = res.Speedup(), res.ReusedFrom
		} else {
			st.Status = runstate.GraphFailed
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
