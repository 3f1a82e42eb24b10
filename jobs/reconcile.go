package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/runstate"
)

// Reconciler finds runs that cannot reach a final state by themselves and
// repairs them. Every run must end, whatever dies:
//
//   - a graph whose task asynq archived without the worker's error handler
//     (its lease expired on the last attempt: asynq's recoverer archives
//     silently) is recorded as failed, with the task's last error;
//   - a graph whose task is gone (deleted, or lost with a Redis restart
//     while the run's record survived) gets its task again;
//   - a run Redis lost is rebuilt from the store (Restore);
//   - a run whose graphs are all finished but which has no live finalize
//     task gets one (a new generation when the old ID is taken).
//
// Workers run it every 30 s, one at a time across the fleet (a Redis lock);
// `producer reconcile` runs one pass by hand.
type Reconciler struct {
	runs  *runstate.Runs
	store artifacts.Store
	q     *queueClient
	insp  *asynq.Inspector
	log   io.Writer
	// MinAge leaves runs younger than this alone: a submit creates the
	// run's record before it enqueues the tasks.
	MinAge time.Duration
}

// NewReconciler builds a reconciler; log receives one line per repair.
func NewReconciler(rdb redis.UniversalClient, store artifacts.Store, log io.Writer) *Reconciler {
	if log == nil {
		log = io.Discard
	}
	return &Reconciler{runs: runstate.NewRuns(rdb), store: store, q: newQueueClient(rdb),
		insp: asynq.NewInspectorFromRedisClient(rdb), log: log, MinAge: 10 * time.Second}
}

// Repair is one thing the reconciler did.
type Repair struct {
	Run    string `json:"run"`
	Graph  string `json:"graph,omitempty"`
	Action string `json:"action"` // restored, re-enqueued, failed, finalize
	Detail string `json:"detail"`
}

func (p Repair) String() string {
	if p.Graph != "" {
		return fmt.Sprintf("run %s graph %s: %s: %s", p.Run, p.Graph, p.Action, p.Detail)
	}
	return fmt.Sprintf("run %s: %s: %s", p.Run, p.Action, p.Detail)
}

// Pass reconciles every run not yet final.
func (r *Reconciler) Pass(ctx context.Context) ([]Repair, error) {
	var all []Repair
	var errs []error
	fresh, err := r.runs.MarkEpoch(ctx)
	if err != nil {
		return nil, err
	}
	if fresh {
		reps, err := r.fromStore(ctx)
		all = append(all, reps...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	ids, err := r.runs.Running(ctx)
	if err != nil {
		return all, err
	}
	for _, id := range ids {
		reps, err := r.Run(ctx, id)
		all = append(all, reps...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// fromStore restores the runs the store has without a state (not
// finalized) that Redis does not know: after Redis lost its data, nothing
// else remembers them. Listing runs/ is paid once per such loss.
func (r *Reconciler) fromStore(ctx context.Context) ([]Repair, error) {
	keys, err := r.store.List(ctx, "runs/")
	if err != nil {
		return nil, fmt.Errorf("reconcile: list runs in %s: %w", r.store, err)
	}
	specs, states := map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		run, rest, ok := strings.Cut(strings.TrimPrefix(k, "runs/"), "/")
		switch {
		case !ok:
		case rest == "run.json":
			specs[run] = true
		case rest == "state.json":
			states[run] = true
		}
	}
	var reps []Repair
	for run := range specs {
		if states[run] {
			continue
		}
		if _, err := r.runs.Target(ctx, run); !errors.Is(err, runstate.ErrNoRun) {
			// Redis knows it (or cannot say). A run recorded before the
			// running list existed joins it, so that the pass looks at it.
			if err == nil {
				r.runs.MarkRunning(ctx, run)
			}
			continue
		}
		got, err := r.Run(ctx, run)
		reps = append(reps, got...)
		if err != nil {
			return reps, err
		}
	}
	return reps, nil
}

// Run reconciles one run.
func (r *Reconciler) Run(ctx context.Context, run string) ([]Repair, error) {
	var reps []Repair
	note := func(p Repair) {
		reps = append(reps, p)
		fmt.Fprintf(r.log, "%s reconcile: %s\n", time.Now().Format("15:04:05"), p)
	}
	st, err := r.runs.Get(ctx, run)
	if errors.Is(err, runstate.ErrNoRun) {
		restored, rerr := Restore(ctx, r.runs, r.store, run)
		if rerr != nil {
			if errors.Is(rerr, runstate.ErrNoRun) {
				// Listed as running but known nowhere: drop the listing.
				r.runs.UnmarkRunning(ctx, run)
			}
			return reps, rerr
		}
		if restored {
			note(Repair{Run: run, Action: "restored", Detail: "Redis had lost the run; its record was rebuilt from " + r.store.String()})
		}
		if st, err = r.runs.Get(ctx, run); err != nil {
			return reps, err
		}
	} else if err != nil {
		return reps, err
	}
	if st.Final() {
		r.runs.UnmarkRunning(ctx, run)
		return reps, nil
	}
	if !st.Restored && time.Since(st.CreatedAt) < r.MinAge {
		return reps, nil
	}
	var spec *RunSpec
	var waiting []string
	for _, g := range st.GraphNames() {
		if st.Graphs[g].Status == runstate.GraphPending {
			waiting = append(waiting, g)
		}
	}
	live, err := r.liveTasks(ctx, st.Run, st.Target, waiting)
	if err != nil {
		return reps, err
	}
	pending := 0
	for _, g := range waiting {
		pending++
		if live[g] {
			continue // in asynq's hands: it runs, or will
		}
		rep, err := r.graph(ctx, st, g, &spec)
		if err != nil {
			return reps, err
		}
		if rep != nil {
			note(*rep)
			if rep.Action == "failed" {
				pending--
			}
		}
	}
	if pending > 0 {
		return reps, nil
	}
	if st, err = r.runs.Get(ctx, run); err != nil || st.Final() {
		return reps, err
	}
	enq, err := enqueueFinalizeReport(ctx, r.runs, r.q, run, st.Target)
	if err != nil {
		return reps, err
	}
	if enq {
		note(Repair{Run: run, Action: "finalize", Detail: "every graph had finished, and no finalize task was live: enqueued one"})
	}
	return reps, nil
}

// liveTasks says which of a run's pending graphs have a task asynq still
// means to run (pending, active, scheduled, retry or aggregating), from
// the "state" field of each task's hash (asynq:{QUEUE}:t:ID, asynq's
// layout, which Inspector.GetTaskInfo reads too): one HGET a graph, all
// in one round trip. A pass looks at every pending graph of every running
// run every 30 s, and GetTaskInfo costs four commands a graph (a check of
// the queue, then a script of two): in a fleetsim night of 1,000 graphs,
// most of them queued for minutes, that was 7.8 Redis commands a graph.
// Only a graph whose task is not live (gone, archived, completed) is
// looked at through the Inspector (graph).
func (r *Reconciler) liveTasks(ctx context.Context, run, target string, graphs []string) (map[string]bool, error) {
	if len(graphs) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(graphs))
	// Each command's error is read below; the pipeline's is one of them.
	_, _ = r.runs.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range graphs {
			cmds[i] = p.HGet(ctx, asynqTaskKey(Queue(target), GraphTaskID(run, g)), "state")
		}
		return nil
	})
	live := map[string]bool{}
	for i, c := range cmds {
		state, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("reconcile run %s: read the state of graph %s's task: %w", run, graphs[i], err)
		}
		switch state {
		case "pending", "active", "scheduled", "retry", "aggregating":
			live[graphs[i]] = true
		}
	}
	return live, nil
}

// asynqTaskKey is the key of a task's hash in asynq's layout
// (internal/base.TaskKey).
func asynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }

// graph looks at a pending graph's task.
func (r *Reconciler) graph(ctx context.Context, st runstate.RunStatus, g string, spec **RunSpec) (*Repair, error) {
	info, err := r.insp.GetTaskInfo(Queue(st.Target), GraphTaskID(st.Run, g))
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
		// Lost, or completed a moment ago: look again before enqueuing.
		if pending, err := r.runs.IsPending(ctx, st.Run, g); err != nil || !pending {
			return nil, err
		}
		if *spec == nil {
			var s RunSpec
			if err := artifacts.GetJSON(ctx, r.store, artifacts.RunKey(st.Run), &s); err != nil {
				return nil, fmt.Errorf("reconcile run %s: %w", st.Run, err)
			}
			*spec = &s
		}
		s := *spec
		task, opts, err := newGraphTask(GraphPayload{V: PayloadVersion, Run: st.Run, Graph: g, WorkKey: s.WorkKeys[g]}, s.Target, s.CandidateTime, len(s.Candidates))
		if err != nil {
			return nil, err
		}
		if _, err := r.q.EnqueueContext(ctx, task, opts...); err != nil {
			if errors.Is(err, asynq.ErrTaskIDConflict) {
				return nil, nil
			}
			return nil, fmt.Errorf("reconcile run %s: enqueue graph %s: %w", st.Run, g, err)
		}
		return &Repair{Run: st.Run, Graph: g, Action: "re-enqueued", Detail: "the graph was pending and its task was gone"}, nil
	case err != nil:
		return nil, fmt.Errorf("reconcile run %s: inspect graph %s: %w", st.Run, g, err)
	case info.State == asynq.TaskStateArchived || info.State == asynq.TaskStateCompleted:
		msg := fmt.Sprintf("its task was archived after %d attempt(s) without its graph being recorded; last error: %s", info.Retried+1, orDefault(info.LastErr, "none"))
		if strings.Contains(info.LastErr, "lease expired") {
			msg = fmt.Sprintf("its worker died on its last attempt (asynq: %s) after %d attempt(s)", info.LastErr, info.Retried+1)
		}
		if info.State == asynq.TaskStateCompleted {
			msg = "its task completed without recording the graph"
		}
		_, remaining, err := r.runs.CompleteGraph(ctx, st.Run, g, runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(backend.FailInfrastructure), Message: msg})
		if err != nil {
			return nil, err
		}
		if remaining == 0 {
			if _, err := enqueueFinalizeReport(ctx, r.runs, r.q, st.Run, st.Target); err != nil {
				return nil, err
			}
		}
		return &Repair{Run: st.Run, Graph: g, Action: "failed", Detail: msg}, nil
	}
	return nil, nil
}

// Loop runs a pass every interval while it holds the fleet's reconciler
// lock, until ctx ends. The lock outlives a pass by a whole interval, so
// one worker keeps it while it lives and another takes over when it dies.
func (r *Reconciler) Loop(ctx context.Context, every time.Duration) {
	var b [12]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if held, err := r.runs.HoldReconcilerLock(ctx, token, 3*every); err != nil || !held {
			continue
		}
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(r.log, "%s reconcile: %v\n", time.Now().Format("15:04:05"), err)
		}
	}
}
