package jobs

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// An attempt reports where it stands — its phase, the candidate in it and
// since when — to Redis (runstate.Runs.SetProgress) for `producer status`
// and the run page, and to the Observer, for the metrics' count of tasks
// per phase. The record goes when the attempt ends (ClearProgress) or its
// graph completes, and expires with the run.
//
// Redis hears of a phase once it has lasted progressDelay: a write is
// scheduled at the first change and takes whatever phase the attempt is in
// by then. The next write comes no sooner than progressEvery after it, so
// an attempt writes at most one HSET a second (a task of a few seconds
// wrote one per 300 ms before, three a task of a small cold graph in
// BenchmarkForcedRerunAndRedisCommands), and a
// small graph whose phases all pass quicker costs no progress command at
// all (nor the clear at its end). Those phases are gone before anyone
// could read them; the metrics still count every one, at once.

// progressTimeout bounds one progress write: a slow Redis must not hold
// tuning up for long, and a lost write is only a stale display.
const progressTimeout = 2 * time.Second

// progressDelay is how long a phase lasts before it is written (see above):
// shorter than any refresh of status --watch or the run page.
const progressDelay = 300 * time.Millisecond

// progressEvery is the least time between two writes of an attempt: the
// refresh of status --watch (1 s), so that what it shows lags the worker
// by at most one refresh; a phase that lasts longer is always shown.
const progressEvery = time.Second

// progressRecord is what an attempt last reported and what of it reached
// Redis. mu is held across a write, so that an attempt's end (which clears
// the record) never runs beside a write that would bring it back.
type progressRecord struct {
	mu      sync.Mutex
	latest  runstate.Progress
	timer   *time.Timer // a write scheduled, not yet done
	written bool        // Redis holds a record of this attempt
	last    time.Time   // when the last write began
	ended   bool
	// gone: the graph's completion dropped the record (endReport need
	// not clear it).
	gone bool
}

// stop ends attempt n's reports ahead of its graph's completion: no write
// is scheduled or made after it. It says whether the graph may have a
// progress record: this attempt wrote one, or an earlier attempt (n > 1,
// or not numbered) may have left one behind when its worker died.
func (r *progressRecord) stop(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	return r.written || n != 1
}

// dropped records that the graph's completion dropped the record.
func (r *progressRecord) dropped() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone = true
}

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
	r := &a.progress
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latest = p
	if r.timer == nil && !r.ended {
		r.timer = time.AfterFunc(r.nextWrite(now), func() { w.writeProgress(ctx, a) })
	}
}

// nextWrite is how long after now a change reported at now is written:
// progressDelay, or until progressEvery has passed since the last write.
func (r *progressRecord) nextWrite(now time.Time) time.Duration {
	if r.last.IsZero() {
		return progressDelay
	}
	return max(progressDelay, r.last.Add(progressEvery).Sub(now))
}

// writeProgress writes what attempt a reported last, unless it has ended.
func (w *Worker) writeProgress(ctx context.Context, a *attempt) {
	r := &a.progress
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if r.ended {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), progressTimeout)
	defer cancel()
	// Counted as written even when the write failed: it may have landed,
	// and a clear of a record that is not there costs one command.
	r.written = true
	r.last = time.Now()
	if err := w.runs.SetProgress(rctx, a.p.Run, a.p.Graph, r.latest); err != nil {
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
	r := &a.progress
	r.mu.Lock()
	r.ended = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	clear := r.written && !r.gone
	r.mu.Unlock()
	if !clear {
		return
	}
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
