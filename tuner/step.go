package tuner

import (
	"context"
	"time"

	"github.com/tunefleet/tunefleet/backend"
)

// Phase is a part of tuning one candidate.
type Phase string

// The phases of a candidate, in order.
const (
	PhaseBuild     Phase = "build"
	PhaseCheck     Phase = "check"     // the samples against their reference outputs, and the batch bounds
	PhaseBenchmark Phase = "benchmark" // every batch size of the sweep
)

// Step is one moment of tuning a graph, for a progress display and for
// metrics: a phase of a candidate starts (Done false) or ends (Done, with
// Elapsed), or a benchmark moves on (BatchSize, and Calls timed so far at
// it). A phase ends whether it succeeded or not.
type Step struct {
	Graph     string
	Candidate string
	// Index is the candidate's place in the list (from 0), of Count.
	Index, Count int
	Phase        Phase
	Done         bool
	Elapsed      time.Duration
	// BatchSize is the batch size being measured (benchmark only); Calls
	// how many timed calls it has so far (0 when its measurement starts).
	// Backends that measure in a tool of their own (trtexec) report no
	// calls until they are done.
	BatchSize int
	Calls     int
}

// Observer hears the steps of tuning. It is called from the tuning
// goroutine, and for Calls from the goroutine that reads a backend's child
// process: it must be quick and safe for concurrent use.
type Observer func(Step)

// stepper emits one candidate's steps to the options' observer.
type stepper struct {
	obs     Observer
	noCalls bool
	base    Step
}

func (t *graphTuner) stepper(idx int, c backend.Candidate) stepper {
	return stepper{obs: t.opts.Observe, noCalls: t.opts.NoCalls, base: Step{Graph: t.g.Name, Candidate: c.String(), Index: idx, Count: len(t.opts.Candidates)}}
}

// start says a phase starts and returns what ends it.
func (s stepper) start(p Phase) (end func()) {
	if s.obs == nil {
		return func() {}
	}
	st := s.base
	st.Phase = p
	s.obs(st)
	began := time.Now()
	return func() {
		st.Done, st.Elapsed = true, time.Since(began)
		s.obs(st)
	}
}

// batch says the benchmark measures batch size bs, and returns a context
// whose benchmark reports its calls as steps.
func (s stepper) batch(ctx context.Context, bs int) context.Context {
	if s.obs == nil {
		return ctx
	}
	st := s.base
	st.Phase, st.BatchSize = PhaseBenchmark, bs
	s.obs(st)
	if s.noCalls {
		return ctx
	}
	return backend.WithCallProgress(ctx, func(calls int) {
		c := st
		c.Calls = calls
		s.obs(c)
	})
}
