package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// An attempt is one try at a graph's task. Redis numbers attempts, marks
// the one that is tuning (so that one that died with its worker is seen by
// the next), and keeps the newest failure while the graph is pending:
// what a person following the run, the retry budget and the quarantine of
// poison graphs go by. asynq's own retry count cannot serve: a hand-back
// does not raise it, a re-enqueued task starts it again from zero, and
// asynq's lease recoverer archives a task without telling anyone.

// StartAttempt numbers a new attempt at a graph (1, 2, ...) and records
// that worker is on it (for status). The numbers come from a counter in
// Redis, not from asynq's retry count: two attempts never share a number,
// so never an attempt result key.
func (r *Runs) StartAttempt(ctx context.Context, run, graph, worker string) (int, error) {
	n, err := r.rdb.HIncrBy(ctx, attemptsKey(run), graph, 1).Result()
	if err != nil {
		return 0, fmt.Errorf("count attempts of run %s graph %s: %w", run, graph, err)
	}
	if err := r.setPending(ctx, run, graph, func(st *GraphStatus) {
		st.Worker, st.Attempts = worker, int(n)
	}); err != nil {
		return 0, fmt.Errorf("record attempt %d of run %s graph %s: %w", n, run, graph, err)
	}
	return int(n), nil
}

// setPendingScript replaces a graph's status only while it is pending: a
// late duplicate must not overwrite a final status.
var setPendingScript = redis.NewScript(`
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 0
`)

// setPending updates a pending graph's status with edit. The read and the
// write are two steps: a pending graph's status has one writer at a time
// (the attempt that holds its task), so only the final transitions, which
// are scripts, need to be atomic.
func (r *Runs) setPending(ctx context.Context, run, graph string, edit func(*GraphStatus)) error {
	st := GraphStatus{Status: GraphPending}
	raw, err := r.rdb.HGet(ctx, graphsKey(run), graph).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &st); err != nil || st.Status != GraphPending {
			st = GraphStatus{Status: GraphPending}
		}
	}
	edit(&st)
	b, _ := json.Marshal(st)
	return setPendingScript.Run(ctx, r.rdb, []string{pendingKey(run), graphsKey(run)}, graph, string(b)).Err()
}

// beginTuningScript marks attempt ARGV[2] of graph ARGV[1] as tuning. An
// attempt still marked from before never ended: its worker died in the
// middle (SIGKILL, out of memory, a machine gone), and it is counted.
// Returns the deaths so far.
var beginTuningScript = redis.NewScript(`
local prev = redis.call('HGET', KEYS[1], ARGV[1])
local deaths = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if prev and prev ~= ARGV[2] then deaths = redis.call('HINCRBY', KEYS[2], ARGV[1], 1) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return deaths
`)

// BeginTuning marks attempt n of a graph as tuning and returns how many
// earlier attempts died while tuning (their worker never ended them).
// Only tuning is marked, not the download before it: a prefetched task
// that dies with a worker whose other task killed it is not to blame.
func (r *Runs) BeginTuning(ctx context.Context, run, graph string, n int) (deaths int, err error) {
	d, err := beginTuningScript.Run(ctx, r.rdb, []string{tuningKey(run), deathsKey(run)}, graph, n).Int()
	if err != nil {
		return 0, fmt.Errorf("mark run %s graph %s as tuning: %w", run, graph, err)
	}
	return d, nil
}

var endTuningScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`)

// EndTuning clears attempt n's tuning mark: it ended, whatever its outcome.
func (r *Runs) EndTuning(ctx context.Context, run, graph string, n int) error {
	if err := endTuningScript.Run(ctx, r.rdb, []string{tuningKey(run)}, graph, n).Err(); err != nil {
		return fmt.Errorf("end tuning of run %s graph %s: %w", run, graph, err)
	}
	return nil
}

// Deaths is how many attempts at a graph died while tuning.
func (r *Runs) Deaths(ctx context.Context, run, graph string) (int, error) {
	n, err := r.rdb.HGet(ctx, deathsKey(run), graph).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read deaths of run %s graph %s: %w", run, graph, err)
	}
	return n, nil
}

// AttemptFailed records a failed attempt's class and error on its pending
// graph (status shows them) and returns when the graph's first failure
// happened: retries are budgeted by time from then, so an outage of
// minutes is ridden out whatever the number of attempts it costs.
func (r *Runs) AttemptFailed(ctx context.Context, run, graph string, n int, class, msg string) (since time.Time, err error) {
	now := time.Now().UTC()
	if err := r.rdb.HSetNX(ctx, failingKey(run), graph, now.UnixMilli()).Err(); err != nil {
		return now, fmt.Errorf("record failure of run %s graph %s: %w", run, graph, err)
	}
	ms, err := r.rdb.HGet(ctx, failingKey(run), graph).Result()
	if err != nil {
		return now, fmt.Errorf("read failures of run %s graph %s: %w", run, graph, err)
	}
	if v, perr := strconv.ParseInt(ms, 10, 64); perr == nil {
		since = time.UnixMilli(v).UTC()
	} else {
		since = now
	}
	err = r.setPending(ctx, run, graph, func(st *GraphStatus) {
		st.LastError, st.LastClass = firstLine(msg), class
		if n > st.Attempts {
			st.Attempts = n
		}
	})
	if err != nil {
		return since, fmt.Errorf("record failure of run %s graph %s: %w", run, graph, err)
	}
	return since, nil
}

// Attempts is the number of attempts started at a graph.
func (r *Runs) Attempts(ctx context.Context, run, graph string) (int, error) {
	n, err := r.rdb.HGet(ctx, attemptsKey(run), graph).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read attempts of run %s graph %s: %w", run, graph, err)
	}
	return n, nil
}

// firstLine keeps a failure's first line: what status shows of it.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// beginScript is TaskState, BindPlatform and StartAttempt in one round
// trip, for the path every task of a one-platform worker takes first:
// {'norun'}; {empty string} when the graph is no longer pending and
// nothing is to be done; {':'..target, generation} when it is no longer
// pending, the run waits for finalize and no finalize task of the run's
// current generation is known to be queued (FinalizeQueued); {'bound',
// platform} when the run is bound to another platform; else {'pending',
// platform, attempt}, the attempt numbered and the graph's status naming
// the worker and the attempt. The three calls it replaces cost a task
// ten Redis commands and five round trips; this is one round trip of
// seven commands at most.
var beginScript = redis.NewScript(finalizeDueLua + `
local h = redis.call('HMGET', KEYS[1], 'status', 'platform', 'target', 'finalize_gen', 'finalize_queued')
if not h[1] then return {'norun'} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  if redis.call('SCARD', KEYS[2]) ~= 0 then return {''} end
  return finalize_due(h[1], h[3], h[4], h[5])
end
local bound = h[2]
if not bound then
  redis.call('HSET', KEYS[1], 'platform', ARGV[2])
  bound = ARGV[2]
end
if bound ~= ARGV[2] then return {'bound', bound} end
local n = redis.call('HINCRBY', KEYS[4], ARGV[1], 1)
local ok, st = pcall(cjson.decode, redis.call('HGET', KEYS[3], ARGV[1]) or '')
if not ok or type(st) ~= 'table' or st['status'] ~= 'pending' then st = {status = 'pending'} end
st['worker'] = ARGV[3]
st['attempts'] = n
redis.call('HSET', KEYS[3], ARGV[1], cjson.encode(st))
return {'pending', bound, n}
`)

// Begin is what a task of a one-platform worker asks first, in one round
// trip: whether its graph is still pending (TaskState), the run's
// platform, binding the run to platform when it is bound to none
// (BindPlatform), and, when the run is bound to platform, a new attempt
// numbered and recorded for worker (StartAttempt; attempt 0 otherwise).
// A run Redis does not know gives ErrNoRun.
func (r *Runs) Begin(ctx context.Context, run, graph, platform, worker string) (b Beginning, err error) {
	res, err := beginScript.Run(ctx, r.rdb, []string{runKey(run), pendingKey(run), graphsKey(run), attemptsKey(run)}, graph, platform, worker).Slice()
	if err != nil {
		return b, fmt.Errorf("start an attempt of run %s graph %s: %w", run, graph, err)
	}
	kind, _ := res[0].(string)
	switch {
	case kind == "norun":
		return b, fmt.Errorf("%w %q", ErrNoRun, run)
	case kind == "pending":
		b.Pending = true
		b.Bound, _ = res[1].(string)
		n, _ := res[2].(int64)
		b.Attempt = int(n)
	case kind == "bound":
		b.Pending = true
		b.Bound, _ = res[1].(string)
	default:
		b.FinalizeTarget, b.FinalizeGen = finalizeDue(res)
	}
	return b, nil
}

// finalizeDueLua defines finalize_due, the answer of Begin and TaskState
// for a graph no longer pending whose run has no graph pending either:
// {""} when nothing is to be done (the run is final, or a finalize task of
// its current generation is known to be queued: FinalizeQueued), else
// {':'..target, generation}. A run with graphs still pending answers {""}
// before asking (its last graph's completion enqueues finalize).
const finalizeDueLua = `
local function finalize_due(status, target, gen, queued)
  if not status or status == 'done' or status == 'failed' or status == 'cancelled' then return {''} end
  gen = gen or '0'
  if queued == gen then return {''} end
  return {':' .. (target or ''), tonumber(gen)}
end
`

// finalizeDue reads finalize_due's answer: the target whose queue takes
// the run's finalize ("" when none is due) and its generation.
func finalizeDue(res []any) (target string, gen int) {
	kind, _ := res[0].(string)
	target = strings.TrimPrefix(kind, ":")
	if len(res) > 1 {
		n, _ := res[1].(int64)
		gen = int(n)
	}
	return target, gen
}

// Beginning is what Begin found.
type Beginning struct {
	Pending bool
	// FinalizeTarget is set when the graph is not pending, the run waits
	// for finalize and no finalize task of the run's current generation is
	// known to be queued (FinalizeQueued): the target whose queue takes
	// it. A duplicate task of a run whose finalize is queued thus costs
	// one round trip; a finalize task that dies without finalizing the run
	// is the reconciler's to replace, as it is for every other caller.
	FinalizeTarget string
	// FinalizeGen is the run's finalize generation, with FinalizeTarget.
	FinalizeGen int
	// Bound is the platform the run is bound to (when Pending).
	Bound string
	// Attempt is the new attempt's number, 0 when the run is bound to
	// another platform (no attempt was started).
	Attempt int
}
