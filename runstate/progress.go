package runstate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/human"
)

// Progress is where an attempt at a pending graph stands, as its worker
// reports it: what status, the run page and the metrics show while the
// graph is tuned. The worker writes it once per phase change (never per
// benchmark call) and clears it when its attempt ends; the graph's
// completion clears it too, and it expires with the run's other keys.
type Progress struct {
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
	// Phase is one of the Phase… constants.
	Phase string `json:"phase"`
	// Candidate is the one being built, checked or measured (its index
	// from 1 of Count); "" outside those phases.
	Candidate string `json:"candidate,omitempty"`
	Index     int    `json:"index,omitempty"`
	Count     int    `json:"count,omitempty"`
	// Prefetched: the worker took the task ahead of a free slot (asynq
	// calls it active; it has not started tuning).
	Prefetched bool `json:"prefetched,omitempty"`
	// PhaseSince and AttemptSince are the worker's clock at the phase's
	// and the attempt's start.
	PhaseSince   time.Time `json:"phase_since"`
	AttemptSince time.Time `json:"attempt_since"`
}

// The phases an attempt reports. Build, check and benchmark are the
// tuner's (tuner.Phase) and hold a slot; download and upload are the
// store's; waiting is a prefetched task waiting for a slot.
const (
	PhaseWaiting   = "waiting"
	PhaseDownload  = "download"
	PhaseBuild     = "build"
	PhaseCheck     = "check"
	PhaseBenchmark = "benchmark"
	PhaseUpload    = "upload"
)

// ProgressPhases lists every phase in the order an attempt goes through
// them (for metrics to initialise their series).
func ProgressPhases() []string {
	return []string{PhaseWaiting, PhaseDownload, PhaseBuild, PhaseCheck, PhaseBenchmark, PhaseUpload}
}

// InPhase is how long the attempt has been in its phase at now, and
// InAttempt how long the attempt has run (0 for a time in the future: the
// worker's clock runs ahead of the reader's).
func (p Progress) InPhase(now time.Time) time.Duration   { return since(p.PhaseSince, now) }
func (p Progress) InAttempt(now time.Time) time.Duration { return since(p.AttemptSince, now) }

func since(t, now time.Time) time.Duration {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return now.Sub(t)
}

// progressKey holds, per pending graph, the Progress of the attempt on it.
func progressKey(run string) string { return keyPrefix + "run:{" + run + "}:progress" }

// SetProgress records where an attempt at a pending graph stands: one
// HSET. A failure is returned for the caller to log; the attempt goes on.
func (r *Runs) SetProgress(ctx context.Context, run, graph string, p Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := r.rdb.HSet(ctx, progressKey(run), graph, b).Err(); err != nil {
		return fmt.Errorf("record the progress of run %s graph %s: %w", run, graph, err)
	}
	return nil
}

// clearProgressScript drops a graph's progress only while it is the
// attempt's own: a later attempt (the task re-delivered while this one
// ended) keeps its record.
var clearProgressScript = redis.NewScript(`
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local ok, p = pcall(cjson.decode, raw)
if ok and tostring(p['attempt']) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
`)

// ClearProgress drops the progress attempt recorded for a graph when the
// attempt ends, whatever became of it.
func (r *Runs) ClearProgress(ctx context.Context, run, graph string, attempt int) error {
	if err := clearProgressScript.Run(ctx, r.rdb, []string{progressKey(run)}, graph, attempt).Err(); err != nil {
		return fmt.Errorf("clear the progress of run %s graph %s: %w", run, graph, err)
	}
	return nil
}

// The states a graph is shown in (GraphStatus.State): its final status,
// or, while it is pending, one view made of Redis's record, the worker's
// progress and asynq's task, so that no two columns contradict.
const (
	StateQueued     = "queued"     // in its queue; no worker has it
	StateScheduled  = "scheduled"  // asynq hands it out later
	StateRetrying   = "retrying"   // failed an attempt; asynq tries again later
	StatePrefetched = "prefetched" // a worker took it ahead of a free slot
	StateStarting   = "starting"   // a worker has it and has reported nothing yet
	StateRunning    = "running"    // an attempt holds a slot (or uploads what it built)
	StateArchived   = "archived"   // asynq gave up on the task; the reconciler repairs the graph
)

// derive sets g.State from what is known of it: its status, its progress
// (nil when none) and asynq's task (nil when not asked or gone).
func (g *GraphStatus) derive() {
	if g.Status != GraphPending {
		g.State = g.Status
		return
	}
	p, t := g.Progress, g.Task
	if p != nil && t != nil && t.State != "active" {
		// asynq no longer has the task in a worker's hands: the attempt
		// that reported this died with its worker (asynq's lease ran
		// out) and its record is stale until the next attempt's.
		g.Progress, p = nil, nil
	}
	switch {
	case p != nil && (p.Phase == PhaseWaiting || p.Prefetched):
		g.State = StatePrefetched
	case p != nil:
		g.State = StateRunning
	case t == nil:
		g.State = StateQueued
	case t.State == "active":
		g.State = StateStarting
	case t.State == "retry":
		g.State = StateRetrying
	case t.State == "scheduled":
		g.State = StateScheduled
	case t.State == "archived":
		g.State = StateArchived
	default:
		g.State = StateQueued
	}
}

// Derive sets every graph's State from its record, its progress and its
// task: call it again after adding the tasks (jobs.AddTasks does).
func (s *RunStatus) Derive() {
	for name, g := range s.Graphs {
		g.derive()
		s.Graphs[name] = g
	}
}

// StateText is the graph's State as a person reads it: a prefetched one
// names its worker ("waiting (prefetched by worker W)").
func (g GraphStatus) StateText() string {
	switch {
	case g.State == StatePrefetched && g.Progress != nil:
		return "waiting (prefetched by worker " + g.Progress.Worker + ")"
	case g.State == "":
		return g.Status
	}
	return g.State
}

// Doing says what the attempt does, in words that change only when it
// does (no elapsed time): "build ort:cpu:all (2/3) on worker w1",
// "waiting for a slot on worker w1".
func (p Progress) Doing() string {
	var b strings.Builder
	switch p.Phase {
	case PhaseWaiting:
		b.WriteString("waiting for a slot")
	case PhaseDownload, PhaseUpload:
		b.WriteString(p.Phase)
	default:
		b.WriteString(p.Phase)
		if p.Candidate != "" {
			b.WriteString(" " + p.Candidate)
		}
		if p.Index > 0 && p.Count > 0 {
			fmt.Fprintf(&b, " (%d/%d)", p.Index, p.Count)
		}
	}
	b.WriteString(" on worker " + p.Worker)
	return b.String()
}

// Text is Doing with the time spent at now, in the phase and in the
// attempt: "build ort:cpu:all (2/3) on worker w1, 4.2s in build, 12.0s
// in attempt 1".
func (p Progress) Text(now time.Time) string {
	return fmt.Sprintf("%s, %s in %s, %s in attempt %d", p.Doing(), human.Duration(p.InPhase(now)), p.Phase, human.Duration(p.InAttempt(now)), p.Attempt)
}
