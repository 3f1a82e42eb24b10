package backend

import (
	"fmt"
	"time"
)

// How one batch size of one candidate is measured: the stop rule, its
// defaults and limits, and why a measurement stopped.

// StopRule says how one batch size of one candidate is measured.
//
// Warm-up: up to Warmup unmeasured calls, and no more once WarmupTime has
// passed (zero: a quarter of MaxTime), so that a model whose calls take
// seconds is not warmed up for minutes; at least one warm-up call is made
// when Warmup > 0 (a first call pays for lazy initialisation).
//
// Timed calls: the measurement is taken in Rounds rounds (tuning
// interleaves the rounds of the candidates it compares: A B A B …, in an
// order shuffled per round), each of about MaxTime/Rounds and at most
// MaxSamples/Rounds calls. It ends after every round was taken, or earlier,
// after at least five rounds, once every candidate has MinSamples calls
// and a stable measurement ("stable"). A measurement that has fewer than
// MinCalls calls when its time is up goes on until it has them or CapTime
// (zero: five times MaxTime) has passed; one that the cap stopped short is
// marked Short ("measured from N calls").
//
// A measurement is unstable (Stats.Unstable) when what its figure is made
// of could move it; Stats.UnstableCause names the condition. (Window is
// kept for the record and for backends that replay a trace; AITune's own
// rules look at the last Window calls only.)
type StopRule struct {
	Warmup     int           `json:"warmup"`
	WarmupTime time.Duration `json:"warmup_ns,omitempty"`
	Window     int           `json:"window"`
	MaxCV      float64       `json:"max_cv"`
	MinSamples int           `json:"min_samples"`
	MaxSamples int           `json:"max_samples"`
	MaxTime    time.Duration `json:"max_time_ns"`
	Rounds     int           `json:"rounds,omitempty"`
	MinCalls   int           `json:"min_calls,omitempty"`
	CapTime    time.Duration `json:"cap_ns,omitempty"`
}

// DefaultStopRule is what tuning uses unless told otherwise.
func DefaultStopRule() StopRule {
	return StopRule{Warmup: 10, Window: 20, MaxCV: 0.10, MinSamples: 100, MaxSamples: 10000, MaxTime: 2 * time.Second,
		Rounds: 10, MinCalls: 10}
}

// WarmupLimit is how long warm-up may take: WarmupTime, or a quarter of
// MaxTime when it is zero.
func (r StopRule) WarmupLimit() time.Duration {
	if r.WarmupTime > 0 {
		return r.WarmupTime
	}
	return r.MaxTime / 4
}

// CapLimit is how long a measurement may go on to reach MinCalls.
func (r StopRule) CapLimit() time.Duration {
	if r.CapTime > 0 {
		return max(r.CapTime, r.MaxTime)
	}
	return 5 * r.MaxTime
}

// RoundCount is Rounds, at least 1.
func (r StopRule) RoundCount() int { return max(r.Rounds, 1) }

// Validate checks the rule's fields.
func (r StopRule) Validate() error {
	switch {
	case r.Warmup < 0:
		return fmt.Errorf("stop rule: warmup %d is negative", r.Warmup)
	case r.WarmupTime < 0:
		return fmt.Errorf("stop rule: warm-up time %s is negative", r.WarmupTime)
	case r.Window < 2:
		return fmt.Errorf("stop rule: window %d must be at least 2", r.Window)
	case !(r.MaxCV > 0): // also rejects NaN, which would never count as stable
		return fmt.Errorf("stop rule: max_cv %g must be positive", r.MaxCV)
	case r.MinSamples < r.Window:
		return fmt.Errorf("stop rule: min_samples %d is below the window %d", r.MinSamples, r.Window)
	case r.MaxSamples < r.MinSamples:
		return fmt.Errorf("stop rule: max_samples %d is below min_samples %d", r.MaxSamples, r.MinSamples)
	case r.MaxTime <= 0:
		return fmt.Errorf("stop rule: max_time must be positive")
	case r.Rounds < 0 || r.MinCalls < 0 || r.CapTime < 0:
		return fmt.Errorf("stop rule: rounds, min_calls and cap must not be negative")
	}
	return nil
}

// Stop reasons recorded in Stats.
const (
	StopStable     = "stable"
	StopMaxSamples = "max_samples"
	StopTimeLimit  = "time_limit"
	StopRounds     = "rounds"   // every round was taken
	StopTimeCap    = "time_cap" // the cap stopped it before MinCalls
)
