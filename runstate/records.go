package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reading runs' records: one run (Get), many in one round trip (getAll),
// a listing's page (listAll: a final run's recorded summary instead of its
// graphs), and the decoding of a record from its hashes.

// Get reads a run's record.
func (r *Runs) Get(ctx context.Context, run string) (RunStatus, error) {
	sts, errs := r.getAll(ctx, []string{run})
	return sts[0], errs[0]
}

// getAll reads the records of runs in one round trip: a plain pipeline,
// not MULTI/EXEC, as the keys of different runs lie in different cluster
// slots (each run's keys share its hash tag, {RUN}); a cluster client
// splits a pipeline by slot and sends each part to its node. errs[i] is
// run i's: ErrNoRun when Redis has no record of it.
func (r *Runs) getAll(ctx context.Context, runs []string) (sts []RunStatus, errs []error) {
	type reads struct{ run, graphs, progress *redis.MapStringStringCmd }
	cmds := make([]reads, len(runs))
	// The pipeline's error is also each failed command's, read below run
	// by run.
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, run := range runs {
			cmds[i] = reads{p.HGetAll(ctx, runKey(run)), p.HGetAll(ctx, graphsKey(run)), p.HGetAll(ctx, progressKey(run))}
		}
		return nil
	})
	sts, errs = make([]RunStatus, len(runs)), make([]error, len(runs))
	for i, run := range runs {
		sts[i], errs[i] = decodeRun(run, cmds[i].run, cmds[i].graphs, cmds[i].progress)
	}
	return sts, errs
}

// listAll reads the records of runs for a listing: each run's own hash
// in one round trip, then, in a second, the graphs and progress of those
// that are not final or have no recorded summary, or of all of them when
// withGraphs is set. A final run with a summary is listed without its
// graphs (Graphs empty, Summary the recorded one).
func (r *Runs) listAll(ctx context.Context, runs []string, withGraphs bool) (sts []RunStatus, errs []error) {
	if withGraphs {
		return r.getAll(ctx, runs)
	}
	hs := make([]*redis.MapStringStringCmd, len(runs))
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, run := range runs {
			hs[i] = p.HGetAll(ctx, runKey(run))
		}
		return nil
	})
	sts, errs = make([]RunStatus, len(runs)), make([]error, len(runs))
	var need []int
	for i, run := range runs {
		h, err := hs[i].Result()
		var sum Summary
		if err == nil && len(h) > 0 && IsFinal(h["status"]) && h["summary"] != "" && json.Unmarshal([]byte(h["summary"]), &sum) == nil {
			none := redis.NewMapStringStringResult(map[string]string{}, nil)
			sts[i], errs[i] = decodeRun(run, hs[i], none, none)
			sts[i].summary = &sum
			continue
		}
		need = append(need, i)
	}
	if len(need) == 0 {
		return sts, errs
	}
	names := make([]string, len(need))
	for j, i := range need {
		names[j] = runs[i]
	}
	more, merrs := r.getAll(ctx, names)
	for j, i := range need {
		sts[i], errs[i] = more[j], merrs[j]
	}
	return sts, errs
}

// decodeRun is a run's record from the replies of its hashes: the run's,
// its graphs' and the progress of their attempts.
func decodeRun(run string, hc, gc, pc *redis.MapStringStringCmd) (RunStatus, error) {
	h, err := hc.Result()
	if err != nil {
		return RunStatus{}, fmt.Errorf("read run %s: %w", run, err)
	}
	if len(h) == 0 {
		return RunStatus{}, fmt.Errorf("%w %q", ErrNoRun, run)
	}
	gs, err := gc.Result()
	if err != nil {
		return RunStatus{}, fmt.Errorf("read run %s: %w", run, err)
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(h[k]); return n }
	st := RunStatus{
		Run: run, Model: h["model"], Target: h["target"], Platform: h["platform"], Status: h["status"], Total: atoi("total"),
		Done: atoi("done"), Failed: atoi("failed"), Cancelled: atoi("cancelled"), Finalizations: atoi("finalizations"),
		Restored: h["restored"] != "", Nightly: h["nightly"],
		StateKey: h["state_key"], Reason: h["reason"], Graphs: map[string]GraphStatus{},
	}
	st.CreatedAt, _ = time.Parse(time.RFC3339Nano, h["created_at"])
	st.FinishedAt, _ = time.Parse(time.RFC3339Nano, h["finished_at"])
	st.CancelRequested, _ = time.Parse(time.RFC3339Nano, h["cancel_requested"])
	for g, raw := range gs {
		var s GraphStatus
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return RunStatus{}, fmt.Errorf("run %s graph %s: corrupt status: %w", run, g, err)
		}
		st.Graphs[g] = s
	}
	// A progress that does not decode (a worker of another version) is
	// only not shown: it is no part of the record.
	prog, _ := pc.Result()
	for g, raw := range prog {
		var p Progress
		if s, ok := st.Graphs[g]; ok && s.Status == GraphPending && json.Unmarshal([]byte(raw), &p) == nil {
			s.Progress = &p
			st.Graphs[g] = s
		}
	}
	st.Derive()
	return st, nil
}

// GraphNames returns a run's graphs in a stable order.
func (s RunStatus) GraphNames() []string {
	out := make([]string, 0, len(s.Graphs))
	for g := range s.Graphs {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Known reports whether Redis has a record of run and whether that run is
// final; a run it does not know (never submitted here, or past its
// retention) is known=false, for the store to judge (what storegc.FinalFunc
// asks).
func (r *Runs) Known(ctx context.Context, run string) (known, final bool, err error) {
	st, err := r.Get(ctx, run)
	if errors.Is(err, ErrNoRun) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, st.Final(), nil
}
