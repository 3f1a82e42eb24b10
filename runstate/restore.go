package runstate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The store is the record of truth of a run; Redis only keeps its moving
// parts. A Redis restarted without persistence (or a flushed one) loses the
// run's record while run.json, the graphs' results and maybe state.json are
// in the store. jobs.Restore reads them back; Runs.Restore writes the
// record they give, so that `status` still answers, the reconciler can
// re-enqueue what is pending, and attempt numbers go on past the highest
// stored one and the one an attempt in flight may hold (an attempt's
// result key is never written twice).

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

// RestoredRun is a run's record as the store gives it back.
type RestoredRun struct {
	Run, Model, Target string
	// Platform is the platform the stored results were tuned on ("" when
	// none is stored yet): the run's binding.
	Platform  string
	Total     int       // graphs in the run
	CreatedAt time.Time // when it was submitted
	// Final is set for a run finalized before Redis lost it: Status,
	// Reason, StateKey and FinishedAt say how it ended (from state.json).
	Final                    bool
	Status, Reason, StateKey string
	FinishedAt               time.Time
	Graphs                   []RestoredGraph
	Nightly                  string // the nightly that submitted it
}

// RestoredGraph is one graph of a RestoredRun: its status and the highest
// attempt number stored for it.
type RestoredGraph struct {
	Name     string
	Status   GraphStatus
	Attempts int
}

// Restore creates a run's record from what the store gave, as Create does,
// unless Redis has the run: then it returns false and changes nothing. A
// finished run rebuilt for a reader is a cache of the store, kept for at
// most a day.
func (r *Runs) Restore(ctx context.Context, rec RestoredRun) (bool, error) {
	run := rec.Run
	now := time.Now().UTC()
	fields := map[string]string{
		"status": RunRunning, "model": rec.Model, "target": rec.Target, "total": strconv.Itoa(rec.Total),
		"finalizations": "0", "created_at": rec.CreatedAt.Format(time.RFC3339Nano), "restored": now.Format(time.RFC3339Nano),
	}
	counts := map[string]int{}
	for _, g := range rec.Graphs {
		counts[g.Status.Status]++
	}
	fields["done"], fields["failed"], fields["cancelled"] = strconv.Itoa(counts[GraphDone]), strconv.Itoa(counts[GraphFailed]), strconv.Itoa(counts[GraphCancelled])
	if rec.Nightly != "" {
		fields["nightly"] = rec.Nightly
	}
	if rec.Platform != "" {
		fields["platform"] = rec.Platform
	}
	if rec.Final {
		fields["status"], fields["state_key"], fields["finalizations"] = rec.Status, rec.StateKey, "1"
		fields["reason"] = rec.Reason
		fields["finished_at"] = rec.FinishedAt.Format(time.RFC3339Nano)
	}
	args := []any{len(fields)}
	for k, v := range fields {
		args = append(args, k, v)
	}
	for _, g := range rec.Graphs {
		b, _ := json.Marshal(g.Status)
		attempts := g.Attempts
		if g.Status.Status == GraphPending {
			// An attempt may have been in flight when Redis was lost: it
			// holds the number after the highest stored and writes its
			// result later. Leave that number to it, so that no new
			// attempt writes the same result key (its blobs would then be
			// named by nothing).
			attempts++
		}
		args = append(args, g.Name, string(b), g.Status.Status, attempts)
	}
	n, err := restoreScript.Run(ctx, r.rdb, []string{runKey(run), pendingKey(run), graphsKey(run), attemptsKey(run)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("restore run %s: %w", run, err)
	}
	if n == 0 {
		return false, nil
	}
	if err := r.index(ctx, run, rec.Model, rec.Target, rec.CreatedAt); err != nil {
		return true, err
	}
	if rec.Final {
		r.finished(ctx, run, rec.Status)
		ttl := restoredRetention
		if keep := r.keep(); keep > 0 && keep < ttl {
			ttl = keep
		}
		for _, k := range runKeys(run) {
			r.rdb.Expire(ctx, k, ttl)
		}
	}
	return true, nil
}
