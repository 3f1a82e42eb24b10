package jobs

import (
	"context"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// An attempt reports where it stands — its phase, the candidate in it and
// since when — to Redis (runstate.Runs.SetProgress: one HSET per phase
// change, never per benchmark call) for `producer status` and the run
// page, and to the Observer, for the metrics' count of tasks per phase.
// The record goes when the attempt ends (ClearProgress) or its graph
// completes, and expires with the run.

// progressTimeout bounds one progress write: a slow Redis must not hold
// tuning up for long, and a lost write is only a stale display.
const progressTimeout = 2 * time.Second

// report records that attempt a entered phase, with the tuner's step for
// the phases of a candidate (nil otherwise). An attempt not yet numbered
// has nothing to report: it is not started.
func (w *Worker) report(ctx context.Context, a *attempt, phase string, step *tuner.Step) {
	if a.n == 0 {
		return
	}
	now := time.Now()
	if a.began.IsZero() {
		a.began = now
	}
	if phase != a.phase {
		a.phaseSince, a.measuring = now, nil
	}
	p := runstate.Progress{Worker: w.cfg.Name, Attempt: a.n, Phase: phase, PhaseSince: a.phaseSince.UTC(), AttemptSince: a.began.UTC()}
	if step != nil {
		p.Candidate, p.Index, p.Count = step.Candidate, step.Index+1, step.Count
		if phase == runstate.PhaseBenchmark {
			// The candidates are measured together, in interleaved
			// rounds: the phase names them all, and its time runs from
			// the first one's start.
			a.measuring = append(a.measuring, step.Candidate)
			if len(a.measuring) > 1 {
				p.Candidate, p.Index = strings.Join(a.measuring, ", "), 0
			}
		}
	}
	// Taken ahead of a free slot: waiting for one, or downloading while
	// every slot is busy (what a prefetched task does first).
	p.Prefetched = phase == runstate.PhaseWaiting || !a.held && phase == runstate.PhaseDownload && w.slots.full(a.want)
	w.cfg.Observer.TaskPhase(a.queue, a.phase, phase)
	a.phase = phase
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), progressTimeout)
	defer cancel()
	if err := w.runs.SetProgress(rctx, a.p.Run, a.p.Graph, p); err != nil {
		w.cfg.Logger.Debug("progress not recorded", "run", a.p.Run, "graph", a.p.Graph, "error", err)
	}
}

// endReport clears what attempt a reported, when it ends.
func (w *Worker) endReport(ctx context.Context, a *attempt) {
	if a.phase == "" {
		return
	}
	w.cfg.Observer.TaskPhase(a.queue, a.phase, "")
	a.phase = ""
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), progressTimeout)
	defer cancel()
	if err := w.runs.ClearProgress(rctx, a.p.Run, a.p.Graph, a.n); err != nil {
		w.cfg.Logger.Debug("progress not cleared", "run", a.p.Run, "graph", a.p.Graph, "error", err)
	}
}

// stepReporter is the tuner's Observer for attempt a: the metrics' phase
// timings, and a report when a candidate's phase starts (not its batch
// sizes nor its calls: one write per phase change).
func (w *Worker) stepReporter(ctx context.Context, a *attempt) tuner.Observer {
	return func(s tuner.Step) {
		w.observeSteps(s)
		if !s.Done && s.BatchSize == 0 && s.Calls == 0 {
			w.report(ctx, a, string(s.Phase), &s)
		}
	}
}
