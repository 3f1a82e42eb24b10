package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/tuner"
)

// Observer hears what a worker does, for metrics. It is an interface here,
// implemented by package metrics, so that jobs (which deploy tooling
// imports for its client and its documents) does not depend on Prometheus.
// The worker calls it from its task goroutines: an implementation must be
// safe for concurrent use and quick.
type Observer interface {
	// TaskStarted and TaskFinished bracket every tune:graph task the
	// worker is handed, whatever becomes of it; class is the failure class
	// of a failed one, else "".
	TaskStarted(queue string)
	TaskFinished(queue string, outcome Outcome, class string, d time.Duration)
	// PhaseDone says a phase of a task took d: PhaseDownload or
	// PhaseUpload of a graph's files, or a candidate's tuner.Phase.
	PhaseDone(phase string, d time.Duration)
	// Slots says how many of the worker's slots of a kind (gpu.KindGPU,
	// gpu.KindCPU) are busy, of total; heard at start and on every change.
	Slots(kind string, busy, total int)
	// HandedBack says a task was handed back because its run is bound to
	// another platform (the hand-backs WorkerConfig.MaxHandBacks bounds).
	HandedBack()
	// Transferred says n bytes of artifacts crossed to or from the store
	// (DirectionUp, DirectionDown); blobs found already in place are not
	// counted.
	Transferred(direction string, n int64)
	// ResultIndexLookup says whether a graph's work key had a reusable
	// result on the worker's platform.
	ResultIndexLookup(hit bool)
	// QueueWait says how long a task waited in its queue, from its
	// enqueue to its first attempt's start (retries and re-enqueued
	// tasks are not heard: their wait is not the queue's).
	QueueWait(queue string, d time.Duration)
	// CandidateFailed says a candidate failed (class) inside a graph that
	// still got a winner: a loss the graph's outcome does not show.
	CandidateFailed(class string)
	// TaskPhase says a task's attempt moved from one phase to another
	// (runstate.ProgressPhases: from "" when it reports its first, to ""
	// when it ends), for a count of the tasks in each phase.
	TaskPhase(queue, from, to string)
}

// Outcome is what became of a task, as an Observer hears it.
type Outcome string

// Outcomes of a tune:graph task.
const (
	OutcomeSucceeded Outcome = "succeeded" // tuned and recorded (or nothing left to do)
	OutcomeReused    Outcome = "reused"    // completed from the result index
	OutcomeFailed    Outcome = "failed"    // the attempt failed; the graph retries or gives up
	// OutcomeHandedBack: back to the queue for another worker (another
	// platform, busy slots, or this worker shutting down), not a failure.
	OutcomeHandedBack Outcome = "handed_back"
)

// Outcomes lists every Outcome, for metrics to initialise their series.
func Outcomes() []Outcome {
	return []Outcome{OutcomeSucceeded, OutcomeReused, OutcomeFailed, OutcomeHandedBack}
}

// Phases of a task besides the tuner's.
const (
	PhaseDownload = "download" // the graph's inputs from the store
	PhaseUpload   = "upload"   // the engines and logs the result names
)

// Phases lists every phase an Observer hears, in the order a task goes
// through them.
func Phases() []string {
	return []string{PhaseDownload, string(tuner.PhaseBuild), string(tuner.PhaseCheck), string(tuner.PhaseBenchmark), PhaseUpload}
}

// Transfer directions.
const (
	DirectionUp   = "up"
	DirectionDown = "down"
)

// ClassCancelled is the failure class of an attempt stopped because its run
// was cancelled (the graph itself did not fail).
const ClassCancelled = "cancelled"

// NopObserver ignores everything: the default.
type NopObserver struct{}

func (NopObserver) TaskStarted(string)                                  {}
func (NopObserver) TaskFinished(string, Outcome, string, time.Duration) {}
func (NopObserver) PhaseDone(string, time.Duration)                     {}
func (NopObserver) Slots(string, int, int)                              {}
func (NopObserver) HandedBack()                                         {}
func (NopObserver) Transferred(string, int64)                           {}
func (NopObserver) ResultIndexLookup(bool)                              {}
func (NopObserver) QueueWait(string, time.Duration)                     {}
func (NopObserver) CandidateFailed(string)                              {}
func (NopObserver) TaskPhase(string, string, string)                    {}

// transferObserver is an artifacts.Progress that counts the bytes that
// really moved (artifacts.Skipper keeps blobs already in place out).
type transferObserver struct {
	obs       Observer
	direction string
}

func (t transferObserver) Expect(int64)  {}
func (t transferObserver) Moved(n int64) { t.obs.Transferred(t.direction, n) }
func (t transferObserver) Skipped(int64) {}

// withTransfers returns a context whose artifact transfers are counted in
// direction.
func (w *Worker) withTransfers(ctx context.Context, direction string) context.Context {
	return artifacts.WithProgress(ctx, transferObserver{obs: w.cfg.Observer, direction: direction})
}

// timePhase returns what records the phase's duration when it ends.
func (w *Worker) timePhase(phase string) func() {
	start := time.Now()
	return func() { w.cfg.Observer.PhaseDone(phase, time.Since(start)) }
}

// observeSteps passes the tuner's ended phases to the Observer.
func (w *Worker) observeSteps(s tuner.Step) {
	if s.Done && s.BatchSize == 0 {
		w.cfg.Observer.PhaseDone(string(s.Phase), s.Elapsed)
	}
}

// outcome tells what became of a task from its attempt and the handler's
// error. ctx is the task's: asynq cancels it when the worker shuts down
// past its timeout, and hands the task back to the queue.
func outcome(ctx context.Context, a *attempt, err error) (Outcome, string) {
	switch {
	case errors.Is(err, gpu.ErrWrongPlatform), errors.Is(err, errSlotsBusy):
		return OutcomeHandedBack, ""
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return OutcomeHandedBack, ""
	case a.cancelled:
		return OutcomeFailed, ClassCancelled
	case err != nil && a.res != nil && !a.res.OK() && a.res.Failure != nil:
		return OutcomeFailed, string(a.res.Failure.Class)
	case err != nil:
		return OutcomeFailed, string(backend.ClassOf(err, backend.FailInfrastructure))
	case a.res != nil && a.res.Reused:
		return OutcomeReused, ""
	}
	return OutcomeSucceeded, ""
}
