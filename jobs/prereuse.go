package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
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
		if err := artifacts.GetJSON(ctx, c.store, artifacts.RunKey(run), spec); err != nil {
			return nil, 0, fmt.Errorf("read run.json of %s: %w", run, err)
		}
	}
	pending, err := c.runs.rdb.SMembers(ctx, pendingKey(run)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("read run %s: %w", run, err)
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
	err = forEach(ctx, len(reuse), 8, func(ctx context.Context, k int) error {
		g, res := graphs[reuse[k]], found[reuse[k]]
		res.Reused = true
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
		_, left, err := c.runs.CompleteGraph(ctx, run, g, GraphStatus{
			Status: GraphDone, Winner: res.Winner.Candidate, Reason: "reused: " + res.Winner.Reason,
			ResultKey: artifacts.GraphResultKey(run, g), Worker: name, Bench: history.ResultBench(res),
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
// one (indexedEverywhere), nil otherwise; known, when given, is a lookup
// made before and is returned as it is (a copy).
func lookupIndexed(ctx context.Context, store artifacts.Store, spec *RunSpec, platforms, graphs []string, known []*tuner.Result) ([]*tuner.Result, error) {
	found := make([]*tuner.Result, len(graphs))
	if known != nil {
		copy(found, known)
		return found, nil
	}
	if len(platforms) == 0 {
		return found, nil
	}
	err := forEach(ctx, len(graphs), 8, func(ctx context.Context, i int) error {
		res, err := indexedEverywhere(ctx, store, platforms, spec.WorkKeys[graphs[i]])
		found[i] = res
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// indexedEverywhere is the indexed result of workKey on platforms[0] when
// every platform has a good one (nil otherwise) and its winner's engine is
// in the store.
func indexedEverywhere(ctx context.Context, store artifacts.Store, platforms []string, workKey string) (*tuner.Result, error) {
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
		if !r.OK() || r.Winner.Engine == nil {
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

// finalizeInline finalizes a run whose graphs this producer completed,
// with the worker's finalize, given what the producer knows of it (nil:
// nothing). Should it fail here, a finalize task is queued instead, for a
// worker to finish the job with the usual retries.
func (c *Client) finalizeInline(ctx context.Context, run, target string, known *knownRun) error {
	w := &Worker{
		cfg:  WorkerConfig{Store: c.store, Name: producerName(), Signer: c.signer}.withDefaults(),
		runs: c.runs, q: c.q,
	}
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
func ReusedBeforeEnqueue(g GraphStatus) bool {
	return g.Status == GraphDone && strings.HasPrefix(g.Worker, producerPrefix)
}
