package backend

import (
	"context"
	"fmt"
)

// The batch-size sweep: AITune's gain and back-off rule over batch sizes.

// SweepRule stops a batch-size sweep early: when throughput has saturated
// (a batch size is "saturated" if its throughput·(1-MinGain) is below the
// best so far; the sweep stops after more than BackoffLimit consecutive
// saturated sizes, AITune's ThroughputSaturatedProfilingStopStrategy), or,
// with a latency budget, once the latest size's mean latency exceeds it.
type SweepRule struct {
	MinGain         float64 `json:"min_throughput_gain"`
	BackoffLimit    int     `json:"throughput_backoff_limit"`
	LatencyBudgetMs float64 `json:"latency_budget_ms,omitempty"`
}

// DefaultSweepRule is AITune's default (5 % gain, back-off limit 2).
func DefaultSweepRule() SweepRule { return SweepRule{MinGain: 0.05, BackoffLimit: 2} }

// Sweep measures each batch size in order until rule says stop. A batch
// size whose measurement fails ends the sweep with its error, and what was
// measured before it: an engine that cannot run a batch size the graph
// declares must not win on the sizes it could run (AITune drops a backend
// whose measuring raises). Callers that measure only for the record keep
// the partial results.
func Sweep(ctx context.Context, batchSizes []int, rule SweepRule, measure func(ctx context.Context, bs int) (Stats, error)) ([]Stats, error) {
	var out []Stats
	s := NewSweepState(rule)
	for _, bs := range batchSizes {
		st, err := measure(ctx, bs)
		if err != nil {
			return out, fmt.Errorf("batch size %d: %w", bs, err)
		}
		out = append(out, st)
		if s.Add(st) {
			break
		}
	}
	return out, nil
}

// SweepState follows one candidate's sweep under a SweepRule, batch size by
// batch size, for callers that measure several candidates side by side.
type SweepState struct {
	rule      SweepRule
	best      float64
	saturated int
	done      bool
}

// NewSweepState starts a sweep.
func NewSweepState(rule SweepRule) *SweepState { return &SweepState{rule: rule} }

// Add takes the next batch size's statistics and reports whether the sweep
// stops there.
func (s *SweepState) Add(st Stats) bool {
	if s.done {
		return true
	}
	switch {
	case s.rule.LatencyBudgetMs > 0 && st.MeanMs > s.rule.LatencyBudgetMs:
		s.done = true
	case st.Throughput*(1-s.rule.MinGain) < s.best:
		s.saturated++
		s.done = s.saturated > s.rule.BackoffLimit
	default:
		s.best = st.Throughput
		s.saturated = 0
	}
	return s.done
}

// Done reports whether the sweep has stopped.
func (s *SweepState) Done() bool { return s.done }
