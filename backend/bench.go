package backend

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// StopRule decides when the measurement of one batch size is done: after
// Warmup unmeasured calls, calls are timed until the last Window of them has
// a coefficient of variation at most MaxCV (and at least MinSamples were
// taken), or MaxSamples were taken, or MaxTime has passed. It is modelled on
// AITune's StableWindowMeasuringStopStrategy, with differences: a time limit
// instead of an error, more samples by default (MinSamples 100 rather than
// about 20, so that p90/p99 mean something), statistics over every timed
// call rather than the last window, and an unstable result kept and marked
// (Stats.Stable) rather than raised. AITune's own default is a fixed count
// (NumSteps: 30 calls, mean of the last 20); candidates are ranked on these
// means, so rankings can differ from AITune's where timings drift.
type StopRule struct {
	Warmup     int           `json:"warmup"`
	Window     int           `json:"window"`
	MaxCV      float64       `json:"max_cv"`
	MinSamples int           `json:"min_samples"`
	MaxSamples int           `json:"max_samples"`
	MaxTime    time.Duration `json:"max_time_ns"`
}

// DefaultStopRule is what tuning uses unless told otherwise.
func DefaultStopRule() StopRule {
	return StopRule{Warmup: 10, Window: 20, MaxCV: 0.10, MinSamples: 100, MaxSamples: 10000, MaxTime: 2 * time.Second}
}

// Validate checks the rule's fields.
func (r StopRule) Validate() error {
	switch {
	case r.Warmup < 0:
		return fmt.Errorf("stop rule: warmup %d is negative", r.Warmup)
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
	}
	return nil
}

// Stop reasons recorded in Stats.
const (
	StopStable     = "stable"
	StopMaxSamples = "max_samples"
	StopTimeLimit  = "time_limit"
)

// Stats summarises the timed calls of one batch size. Latencies are per call
// (one batch); throughput is samples per second: batch size / mean latency.
type Stats struct {
	BatchSize  int     `json:"batch_size"`
	Samples    int     `json:"samples"`
	MeanMs     float64 `json:"mean_ms"`
	P50Ms      float64 `json:"p50_ms"`
	P90Ms      float64 `json:"p90_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MinMs      float64 `json:"min_ms"`
	MaxMs      float64 `json:"max_ms"`
	CV         float64 `json:"cv"`
	Throughput float64 `json:"throughput"`
	Stable     bool    `json:"stable"`
	StopReason string  `json:"stop_reason"`
	// Telemetry is what the device reported while the measurement ran
	// (GPU backends): "ok", or "rerun" when it throttled every time it was
	// measured, with the problems seen. Empty when nothing was monitored.
	Telemetry         string   `json:"telemetry,omitempty"`
	TelemetryProblems []string `json:"telemetry_problems,omitempty"`
}

// Measure calls run until rule says stop and returns the statistics of the
// timed calls. run performs one call and returns its duration, so that the
// caller times exactly the engine call and nothing around it. The
// context's CallProgress, if any, hears the count after every timed call
// (outside the timed region).
func Measure(ctx context.Context, rule StopRule, batchSize int, run func() (time.Duration, error)) (Stats, error) {
	if err := rule.Validate(); err != nil {
		return Stats{}, err
	}
	progress := CallProgressFrom(ctx)
	for i := 0; i < rule.Warmup; i++ {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		if _, err := run(); err != nil {
			return Stats{}, err
		}
	}
	durs := make([]time.Duration, 0, min(rule.MaxSamples, 4096))
	start := time.Now()
	reason := ""
	for reason == "" {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		d, err := run()
		if err != nil {
			return Stats{}, err
		}
		durs = append(durs, d)
		n := len(durs)
		if progress != nil {
			progress(n)
		}
		switch {
		case n >= rule.MinSamples && cv(durs[n-rule.Window:]) <= rule.MaxCV:
			reason = StopStable
		case n >= rule.MaxSamples:
			reason = StopMaxSamples
		case time.Since(start) >= rule.MaxTime:
			reason = StopTimeLimit
		}
	}
	st := Summarise(batchSize, durs)
	st.StopReason = reason
	st.Stable = len(durs) >= rule.Window && cv(durs[len(durs)-rule.Window:]) <= rule.MaxCV
	return st, nil
}

// Summarise computes statistics over a set of call durations.
func Summarise(batchSize int, durs []time.Duration) Stats {
	st := Stats{BatchSize: batchSize, Samples: len(durs)}
	if len(durs) == 0 {
		return st
	}
	ms := make([]float64, len(durs))
	for i, d := range durs {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	mean, std := meanStd(ms)
	slices.Sort(ms)
	st.MeanMs = mean
	st.P50Ms = percentile(ms, 0.50)
	st.P90Ms = percentile(ms, 0.90)
	st.P99Ms = percentile(ms, 0.99)
	st.MinMs = ms[0]
	st.MaxMs = ms[len(ms)-1]
	if mean > 0 {
		st.CV = std / mean
		st.Throughput = float64(batchSize) * 1000 / mean
	}
	return st
}

// percentile uses linear interpolation between closest ranks on sorted data.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := p * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

func meanStd(xs []float64) (float64, float64) {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)))
}

func cv(durs []time.Duration) float64 {
	xs := make([]float64, len(durs))
	for i, d := range durs {
		xs[i] = float64(d)
	}
	mean, std := meanStd(xs)
	if mean == 0 {
		return 0
	}
	return std / mean
}

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
	best := 0.0
	saturated := 0
	for _, bs := range batchSizes {
		st, err := measure(ctx, bs)
		if err != nil {
			return out, fmt.Errorf("batch size %d: %w", bs, err)
		}
		out = append(out, st)
		if rule.LatencyBudgetMs > 0 && st.MeanMs > rule.LatencyBudgetMs {
			break
		}
		if st.Throughput*(1-rule.MinGain) < best {
			saturated++
			if saturated > rule.BackoffLimit {
				break
			}
			continue
		}
		best = st.Throughput
		saturated = 0
	}
	return out, nil
}
