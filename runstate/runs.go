package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/strategy"
)

// Run statuses.
const (
	RunRunning = "running"
	RunDone    = "done"   // every graph has a winner; latest.json moved
	RunFailed  = "failed" // some graph has none; see the graphs' reasons
	// RunCancelled: `producer cancel` ended it; its pending graphs were
	// dropped and latest.json did not move.
	RunCancelled = "cancelled"
)

// Graph statuses in the run record.
const (
	GraphPending = "pending"
	GraphDone    = "done"
	GraphFailed  = "failed"
	// GraphCancelled: the run was cancelled while the graph waited.
	GraphCancelled = "cancelled"
)

// GraphStatus is one graph's entry in the run record.
type GraphStatus struct {
	Status    string `json:"status"`
	Winner    string `json:"winner,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Class     string `json:"class,omitempty"`
	Message   string `json:"message,omitempty"`
	ResultKey string `json:"result_key,omitempty"`
	Worker    string `json:"worker,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	// LastError and LastClass are the newest failed attempt's, while the
	// graph is pending (a person following a run sees why it retries).
	LastError string `json:"last_error,omitempty"`
	LastClass string `json:"last_class,omitempty"`
	// Bench is the winner's measurement at the batch it was selected at
	// (a done graph): what status prints beside the winner, marked when
	// it is unstable, with its cause. Absent in runs recorded
	// before it was kept.
	Bench *history.Bench `json:"bench,omitempty"`
	// Speedup is the winner's over the run's baseline candidate (absent
	// when either was not measured); ReusedFrom, on a graph completed
	// from the result index, the run that measured it.
	Speedup    *strategy.Speedup `json:"speedup,omitempty"`
	ReusedFrom string            `json:"reused_from,omitempty"`
	// Task is what asynq records of a pending graph's task (its state,
	// retries, last error), filled by jobs.AddTasks when status asks; it
	// is never stored with the graph.
	Task *TaskInfo `json:"task,omitempty"`
	// Progress is where the attempt on a pending graph stands (its
	// worker, phase, candidate and since when), as the worker reported
	// it; State is the one view status and the web UI show of the graph
	// (its final status, or, while pending, queued, prefetched, running…:
	// see RunStatus.Derive). Neither is stored with the graph.
	Progress *Progress `json:"progress,omitempty"`
	State    string    `json:"state,omitempty"`
}

// TaskInfo is what asynq records of a graph's task: whether it waits,
// runs or waits to be retried, how often asynq retried it and the error
// of its last failure. It complements the attempts Redis counts for the
// graph (GraphStatus.Attempts, LastError): asynq's count is the task's
// own, which a hand-back to another platform does not raise and a
// re-enqueued task starts again from zero.
type TaskInfo struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// State is asynq's: pending, active, scheduled, retry, archived,
	// completed or aggregating.
	State    string `json:"state"`
	Retried  int    `json:"retried"`
	MaxRetry int    `json:"max_retry"` // in effect unlimited: retries are budgeted by time
	LastErr  string `json:"last_err,omitempty"`
	// LastFailedAt is when the last failure happened; NextProcessAt when
	// asynq will hand the task to a worker next (retry and scheduled).
	LastFailedAt  time.Time `json:"last_failed_at,omitzero"`
	NextProcessAt time.Time `json:"next_process_at,omitzero"`
}

// RunStatus is a run as Redis records it.
type RunStatus struct {
	Run           string                 `json:"run"`
	Model         string                 `json:"model"`
	Target        string                 `json:"target"`
	Platform      string                 `json:"platform,omitempty"`
	Status        string                 `json:"status"`
	Total         int                    `json:"total"`
	Done          int                    `json:"done"`
	Failed        int                    `json:"failed"`
	Cancelled     int                    `json:"cancelled,omitempty"`
	Finalizations int                    `json:"finalizations"`
	StateKey      string                 `json:"state_key,omitempty"`
	Reason        string                 `json:"reason,omitempty"`
	CreatedAt     time.Time              `json:"created_at"`
	FinishedAt    time.Time              `json:"finished_at,omitzero"`
	Graphs        map[string]GraphStatus `json:"graphs"`
	// summary is the run's Summary as finalize recorded it (SetSummary):
	// a listing reads it instead of the graphs (ListOptions.Graphs).
	summary *Summary
	// Restored is set when Redis had lost the run and its record was
	// rebuilt from the store (run.json, the graphs' results, state.json).
	Restored bool `json:"restored,omitempty"`
	// CancelRequested is when `producer cancel` asked the run to stop.
	CancelRequested time.Time `json:"cancel_requested,omitzero"`
	// Nightly is the nightly that submitted the run ("" by hand).
	Nightly string `json:"nightly,omitempty"`
}

// Duration is how long the run took, or has taken so far at now.
func (r RunStatus) Duration(now time.Time) time.Duration {
	end := r.FinishedAt
	if end.IsZero() {
		end = now
	}
	if r.CreatedAt.IsZero() || end.Before(r.CreatedAt) {
		return 0
	}
	return end.Sub(r.CreatedAt)
}

// SetNightly records the nightly that submitted the run.
func (r *Runs) SetNightly(ctx context.Context, run, nightly string) error {
	if err := r.rdb.HSet(ctx, runKey(run), "nightly", nightly).Err(); err != nil {
		return fmt.Errorf("record run %s's nightly: %w", run, err)
	}
	return nil
}

// Final reports whether the run has been finalized.
func (r RunStatus) Final() bool { return IsFinal(r.Status) }

// IsFinal reports whether a run status is one a run ends in.
func IsFinal(status string) bool {
	return status == RunDone || status == RunFailed || status == RunCancelled
}

// Runs is the run bookkeeping in Redis. Every key of a run carries the run
// id as a hash tag, so one run's keys live on one Cluster node and the Lua
// scripts below may touch them together.
type Runs struct {
	rdb redis.UniversalClient
	// Retention is how long a finished run's bookkeeping stays in Redis
	// (0: DefaultRetention; negative: forever). The store keeps the run
	// (run.json, results, state.json) as its record of truth; after
	// retention, `status` rebuilds a run from it on demand.
	Retention time.Duration
}

// NewRuns wraps a Redis client.
func NewRuns(rdb redis.UniversalClient) *Runs { return &Runs{rdb: rdb} }

// Client is the Redis client the records live in. asynq keeps its queues
// in the same Redis: jobs builds its queue client and inspector on it (as
// asynq's own internal/rdb hands its client out).
func (r *Runs) Client() redis.UniversalClient { return r.rdb }

const keyPrefix = "tunefleet:"

func runKey(run string) string      { return keyPrefix + "run:{" + run + "}" }
func pendingKey(run string) string  { return keyPrefix + "run:{" + run + "}:pending" }
func graphsKey(run string) string   { return keyPrefix + "run:{" + run + "}:graphs" }
func handBackKey(run string) string { return keyPrefix + "run:{" + run + "}:handbacks" }
func attemptsKey(run string) string { return keyPrefix + "run:{" + run + "}:attempts" }

// tuningKey holds, per graph, the attempt whose tuning has begun and not
// ended: one still there when the next attempt begins died with its worker.
func tuningKey(run string) string { return keyPrefix + "run:{" + run + "}:tuning" }

// deathsKey counts, per graph, the attempts that died while tuning.
func deathsKey(run string) string { return keyPrefix + "run:{" + run + "}:deaths" }

// failingKey holds, per graph, when its first retryable failure happened:
// retries are budgeted by time from there.
func failingKey(run string) string { return keyPrefix + "run:{" + run + "}:failing" }

// runKeys are every key of a run (for deletion and tests).
func runKeys(run string) []string {
	return []string{runKey(run), pendingKey(run), graphsKey(run), handBackKey(run), attemptsKey(run), tuningKey(run), deathsKey(run), failingKey(run), progressKey(run)}
}

// ErrNoRun is returned for an unknown run id.
var ErrNoRun = errors.New("no such run")

// createScript records a run, its pending set and its graphs' statuses
// in one step, or nothing when the run exists: a submit that dies half-way
// leaves no record a re-submission would take for complete. The graphs go
// in with one SADD and one HSET per 500 of them (unpack's stack is
// bounded), not two commands per graph: Redis's work per task is the
// queue's cost per task.
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'model', ARGV[2], 'target', ARGV[3], 'total', ARGV[4],
  'done', 0, 'failed', 0, 'finalizations', 0, 'created_at', ARGV[5])
local i = 7
while i <= #ARGV do
  local j = math.min(i + 499, #ARGV)
  redis.call('SADD', KEYS[2], unpack(ARGV, i, j))
  local fv = {}
  for k = i, j do
    fv[#fv + 1] = ARGV[k]
    fv[#fv + 1] = ARGV[6]
  end
  redis.call('HSET', KEYS[3], unpack(fv))
  i = j + 1
end
return 1
`)

// Create records a new run with its graphs pending. It returns false, and
// changes nothing, when the run already exists: re-submission is a no-op.
func (r *Runs) Create(ctx context.Context, run, model, target string, graphs []string) (bool, error) {
	now := time.Now().UTC()
	pending, _ := json.Marshal(GraphStatus{Status: GraphPending})
	args := []any{RunRunning, model, target, len(graphs), now.Format(time.RFC3339Nano), string(pending)}
	for _, g := range graphs {
		args = append(args, g)
	}
	n, err := createScript.Run(ctx, r.rdb, []string{runKey(run), pendingKey(run), graphsKey(run)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("record run %s: %w", run, err)
	}
	if n == 0 {
		return false, nil
	}
	// The index is not part of the run's slot; it is only a listing.
	if err := r.index(ctx, run, model, target, now); err != nil {
		return false, err
	}
	return true, nil
}

// completeScript marks a graph finished once: only the call that removes it
// from the pending set records its status and counts it (and, unless
// ARGV[4] is '0', drops the progress an attempt reported). It returns
// {removed, remaining}.
//
// Whether the run exists is asked only when the graph was not pending (a
// pending graph's run exists): one command less on every task's path.
var completeScript = redis.NewScript(`
local removed = redis.call('SREM', KEYS[1], ARGV[1])
if removed == 0 and redis.call('EXISTS', KEYS[3]) == 0 then return {-1, 0} end
if removed == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
  if ARGV[4] ~= '0' then redis.call('HDEL', KEYS[4], ARGV[1]) end
end
return {removed, redis.call('SCARD', KEYS[1])}
`)

// CompleteGraph records a graph's final status. remaining is the number of
// graphs still pending; first is false when another attempt had already
// completed it (a retried or duplicated task). A run Redis does not know
// (lost with a restart) gives ErrNoRun: counting its graphs as finished
// would enqueue a finalize for nothing. The first completion drops the
// graph's progress (SetProgress).
func (r *Runs) CompleteGraph(ctx context.Context, run, graph string, st GraphStatus) (first bool, remaining int, err error) {
	return r.CompleteGraphProgress(ctx, run, graph, st, true)
}

// CompleteGraphProgress is CompleteGraph for an attempt that knows
// whether the graph may have a progress record (it wrote one, or an
// earlier attempt may have left one): with progress false the record is
// not looked for, one command less on the path of a task that reported
// nothing (a reused result, a small graph). A record left anyway is
// shown by no reader (only a pending graph's is read) and expires with
// the run.
func (r *Runs) CompleteGraphProgress(ctx context.Context, run, graph string, st GraphStatus, progress bool) (first bool, remaining int, err error) {
	b, err := json.Marshal(st)
	if err != nil {
		return false, 0, err
	}
	counter := "done"
	switch st.Status {
	case GraphDone:
	case GraphCancelled:
		counter = "cancelled"
	default:
		counter = "failed"
	}
	drop := "1"
	if !progress {
		drop = "0"
	}
	res, err := completeScript.Run(ctx, r.rdb, []string{pendingKey(run), graphsKey(run), runKey(run), progressKey(run)}, graph, string(b), counter, drop).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("record graph %s of run %s: %w", graph, run, err)
	}
	if res[0] == -1 {
		return false, 0, fmt.Errorf("record graph %s: %w %q", graph, ErrNoRun, run)
	}
	return res[0] == 1, int(res[1]), nil
}

// BindPlatform binds a run to a platform key unless it is bound already,
// and returns the platform the run is bound to.
func (r *Runs) BindPlatform(ctx context.Context, run, platform string) (string, error) {
	if _, err := r.rdb.HSetNX(ctx, runKey(run), "platform", platform).Result(); err != nil {
		return "", fmt.Errorf("bind run %s to a platform: %w", run, err)
	}
	p, err := r.rdb.HGet(ctx, runKey(run), "platform").Result()
	if err != nil {
		return "", fmt.Errorf("read the platform of run %s: %w", run, err)
	}
	return p, nil
}

// taskStateScript answers, in one round trip on the path every task
// takes first: {'pending'} when the graph still waits, {'norun'}, else
// finalize_due's answer (finalizeDueLua).
var taskStateScript = redis.NewScript(finalizeDueLua + `
if redis.call('EXISTS', KEYS[2]) == 0 then return {'norun'} end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return {'pending'} end
if redis.call('SCARD', KEYS[1]) ~= 0 then return {''} end
local h = redis.call('HMGET', KEYS[2], 'status', 'target', 'finalize_gen', 'finalize_queued')
return finalize_due(h[1], h[2], h[3], h[4])
`)

// TaskState reports whether a graph is still pending and, when it is not,
// whether its run waits for a finalize that is not known to be queued
// (on which target's queue, and of which generation): Begin's answer
// without binding the run or starting an attempt, for a worker whose
// slots are of several platforms. A run Redis does not know gives
// ErrNoRun.
func (r *Runs) TaskState(ctx context.Context, run, graph string) (b Beginning, err error) {
	res, err := taskStateScript.Run(ctx, r.rdb, []string{pendingKey(run), runKey(run)}, graph).Slice()
	if err != nil {
		return b, fmt.Errorf("read run %s: %w", run, err)
	}
	switch kind, _ := res[0].(string); kind {
	case "pending":
		b.Pending = true
	case "norun":
		return b, fmt.Errorf("%w %q", ErrNoRun, run)
	default:
		b.FinalizeTarget, b.FinalizeGen = finalizeDue(res)
	}
	return b, nil
}

// BoundPlatform is the platform a run is bound to, "" while none is.
func (r *Runs) BoundPlatform(ctx context.Context, run string) (string, error) {
	p, err := r.rdb.HGet(ctx, runKey(run), "platform").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the platform of run %s: %w", run, err)
	}
	return p, nil
}

// HandBacks is how often a graph's task was handed back to the queue
// because its run is bound to another platform.
func (r *Runs) HandBacks(ctx context.Context, run, graph string) (int, error) {
	n, err := r.rdb.HGet(ctx, handBackKey(run), graph).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read hand-backs of run %s: %w", run, err)
	}
	return n, nil
}

// HandBack counts one more hand-back of a graph's task to another platform
// and returns the count.
func (r *Runs) HandBack(ctx context.Context, run, graph string) (int, error) {
	n, err := r.rdb.HIncrBy(ctx, handBackKey(run), graph, 1).Result()
	if err != nil {
		return 0, fmt.Errorf("count hand-backs of run %s: %w", run, err)
	}
	return int(n), nil
}

// Pending lists the graphs of a run still waiting for a final status.
func (r *Runs) Pending(ctx context.Context, run string) ([]string, error) {
	gs, err := r.rdb.SMembers(ctx, pendingKey(run)).Result()
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", run, err)
	}
	return gs, nil
}

// PendingCount is how many graphs of a run still wait for a final status.
func (r *Runs) PendingCount(ctx context.Context, run string) (int64, error) {
	n, err := r.rdb.SCard(ctx, pendingKey(run)).Result()
	if err != nil {
		return 0, fmt.Errorf("read run %s: %w", run, err)
	}
	return n, nil
}

// IsPending reports whether a graph still waits for a final status.
func (r *Runs) IsPending(ctx context.Context, run, graph string) (bool, error) {
	ok, err := r.rdb.SIsMember(ctx, pendingKey(run), graph).Result()
	if err != nil {
		return false, fmt.Errorf("read run %s: %w", run, err)
	}
	return ok, nil
}

// finishScript moves a run to its final status once and counts how often
// that happened (exactly once, if finalize is right).
var finishScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local s = redis.call('HGET', KEYS[1], 'status')
if s == 'done' or s == 'failed' or s == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'reason', ARGV[2], 'state_key', ARGV[3], 'finished_at', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'finalizations', 1)
if tonumber(ARGV[5]) > 0 then
  for _, k in ipairs(KEYS) do redis.call('EXPIRE', k, ARGV[5]) end
end
return 1
`)

// Finish records the run's final status. It returns false when the run was
// already final (a repeated finalize).
func (r *Runs) Finish(ctx context.Context, run, status, reason, stateKey string) (bool, error) {
	n, err := finishScript.Run(ctx, r.rdb, runKeys(run), status, reason, stateKey, time.Now().UTC().Format(time.RFC3339Nano), int64(r.keep().Seconds())).Int()
	if err != nil {
		return false, fmt.Errorf("finish run %s: %w", run, err)
	}
	if n == -1 {
		return false, fmt.Errorf("finish run: %w %q", ErrNoRun, run)
	}
	if n == 1 {
		// The indexes lie outside the run's hash slot, so they are kept
		// beside the script: a failure here costs the reconciler a look
		// at a final run, or `runs` a stale entry it skips.
		r.finished(ctx, run, status)
	}
	return n == 1, nil
}
