package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/resultindex"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// Skip before enqueue (SubmitOptions.ReuseFrom): the producer completes a
// graph from the result index itself, as a worker completes a graph it
// reuses (its result.json, marked reused, and the graph's status), so
// that no task is queued for work whose result is known on every platform
// that serves the target. The run it finishes is finalized here, by the
// same code a worker finalizes with.

// reuseIndexed completes, from the result index, the pending graphs of run
// whose work key has a good result on every one of platforms, and returns
// the graphs left to enqueue and how many it completed. spec nil: read
// run.json. A result whose winner's engine is missing or resized is left
// to a worker (which drops it from the index and tunes again).
func (c *Client) reuseIndexed(ctx context.Context, run string, spec *RunSpec, platforms, graphs []string, known []*tuner.Result) ([]string, int, error) {
	if len(platforms) == 0 || len(graphs) == 0 {
		return graphs, 0, nil
	}
	if spec == nil {
		spec = &RunSpec{}
		if err := c.readSubmitted(ctx, run, spec); err != nil {
			return nil, 0, err
		}
	}
	pending, err := c.runs.Pending(ctx, run)
	if err != nil {
		return nil, 0, err
	}
	isPending := map[string]bool{}
	for _, g := range pending {
		isPending[g] = true
	}
	found, err := lookupIndexed(ctx, c.store, spec, platforms, graphs, known)
	if err != nil {
		return nil, 0, err
	}
	for i, g := range graphs {
		if !isPending[g] {
			found[i] = nil
		}
	}
	var rest []string
	var reuse []int
	for i, g := range graphs {
		if found[i] == nil {
			rest = append(rest, g)
		} else {
			reuse = append(reuse, i)
		}
	}
	if len(reuse) == 0 {
		return graphs, 0, nil
	}
	// The run's graphs all come from one platform (as a worker binds it).
	if bound, err := c.runs.BindPlatform(ctx, run, platforms[0]); err != nil {
		return nil, 0, err
	} else if bound != platforms[0] {
		return graphs, 0, nil // a worker of another platform took it first
	}
	// No attempt is made, so none is numbered: the result is written
	// where finalize publishes it (result.json, which it then reads in
	// place), before the graph is marked complete so that a finalize
	// never misses it. Replicas racing here write the same result; the
	// one whose CompleteGraph counts is recorded.
	// The results go up together (a model's graphs are a few round trips
	// apart otherwise), then the graphs are completed one by one.
	err = parallel.ForEach(ctx, len(reuse), 8, func(ctx context.Context, k int) error {
		g, res := graphs[reuse[k]], found[reuse[k]]
		res.MarkReused(run)
		req, err := resultRequires(ctx, c.store, res, platforms[0])
		if err != nil {
			return err
		}
		res.Requires = req
		if err := putResult(ctx, c.store, run, g, res); err != nil {
			return fmt.Errorf("publish the reused result of graph %s: %w", g, err)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	name := producerName()
	remaining := -1
	done := &knownRun{spec: spec, results: map[string]*tuner.Result{}}
	for _, i := range reuse {
		g, res := graphs[i], found[i]
		_, left, err := c.runs.CompleteGraph(ctx, run, g, runstate.GraphStatus{
			Status: runstate.GraphDone, Winner: res.Winner.Candidate, Reason: "reused: " + res.Winner.Reason,
			ResultKey: artifacts.GraphResultKey(run, g), Worker: name, Bench: history.ResultBench(res),
			ReusedFrom: res.ReusedFrom, Speedup: res.Speedup(),
		})
		if err != nil {
			return nil, 0, err
		}
		remaining = left
		done.results[g] = res
	}
	if remaining == 0 {
		if err := c.finalizeInline(ctx, run, spec.Target, done); err != nil {
			return nil, 0, err
		}
	}
	return rest, len(reuse), nil
}

// lookupIndexed is, per graph, its indexed result when every platform has
// one (resultindex.Everywhere), nil otherwise; known, when given, is a
// lookup made before and is returned as it is (a copy).
func lookupIndexed(ctx context.Context, store artifacts.Store, spec *RunSpec, platforms, graphs []string, known []*tuner.Result) ([]*tuner.Result, error) {
	if known != nil {
		found := make([]*tuner.Result, len(graphs))
		copy(found, known)
		return found, nil
	}
	workKeys := make([]string, len(graphs))
	for i, g := range graphs {
		workKeys[i] = spec.WorkKeys[g]
	}
	if spec.Remeasure {
		// Measure again: nothing is completed from the index.
		return make([]*tuner.Result, len(graphs)), nil
	}
	return resultindex.LookupAll(ctx, store, platforms, workKeys, spec.StopRule())
}

// finalizeInline finalizes a run whose graphs this producer completed,
// with the worker's finalize, given what the producer knows of it (nil:
// nothing). Should it fail here, a finalize task is queued instead, for a
// worker to finish the job with the usual retries.
func (c *Client) finalizeInline(ctx context.Context, run, target string, known *knownRun) error {
	w := &Worker{
		cfg:  WorkerConfig{Store: c.store, Name: producerName(), Signer: c.signer, WorkDir: c.workDir}.withDefaults(),
		runs: c.runs, q: c.q,
	}
	// A large run's finalize spools to files there: those of a producer
	// that died while finalizing are removed, once a client.
	c.orphans.Do(func() { removeStaleScratch(w.cfg.WorkDir) })
	err := w.finalizeKnown(ctx, FinalizePayload{V: PayloadVersion, Run: run}, known)
	if err == nil {
		return nil
	}
	if errors.Is(err, asynq.SkipRetry) {
		w.giveUpFinalize(ctx, run, err)
		return nil
	}
	if qerr := enqueueFinalize(ctx, c.runs, c.q, run, target); qerr != nil {
		return fmt.Errorf("finalize run %s: %w (and queuing its finalize: %v)", run, err, qerr)
	}
	return nil
}

// producerPrefix starts the worker name of graphs a producer completed
// from the index.
const producerPrefix = "producer@"

func producerName() string { return producerPrefix + hostname() }

// ReusedBeforeEnqueue reports whether a graph was completed from the
// result index by the producer (SubmitOptions.ReuseFrom), never queued.
func ReusedBeforeEnqueue(g runstate.GraphStatus) bool {
	return g.Status == runstate.GraphDone && strings.HasPrefix(g.Worker, producerPrefix)
}
