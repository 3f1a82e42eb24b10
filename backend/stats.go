package backend

import (
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/noise"
)

// What a measurement is: its statistics, the one figure (the centre of
// its rounds' estimates) and that figure's interval.

// Stats summarises the timed calls of one batch size. Latencies are per call
// (one batch). Throughput is samples per second of the robust estimate:
// batch size / EstimateMs, which for a measurement taken in rounds is the
// geometric mean of the rounds' estimates (noise.Center of RoundMs, the
// point ThroughputInterval is the interval of), and otherwise the mean of
// the calls within Tukey's fences (MeanMs is the plain mean of every call,
// outliers included).
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
	// UnstableCause is the condition that made the measurement unstable
	// (Unstable), e.g. "cv 0.21 > 0.10"; empty when it is stable, and in
	// results recorded before causes were.
	UnstableCause string `json:"unstable_cause,omitempty"`
	// EstimateMs is the robust latency the decision uses and every view
	// shows; Outliers how
	// many calls fell outside Tukey's fences (dropped from it), with the
	// fences; OutlierMaxMs the slowest of them.
	EstimateMs   float64 `json:"estimate_ms,omitempty"`
	Outliers     int     `json:"outliers,omitempty"`
	FenceLoMs    float64 `json:"fence_lo_ms,omitempty"`
	FenceHiMs    float64 `json:"fence_hi_ms,omitempty"`
	OutlierMaxMs float64 `json:"outlier_max_ms,omitempty"`
	// RoundMs is the robust latency of each round (ms per call), in the
	// order they were taken; Interleaved says the rounds alternated with
	// those of the other candidates of the same batch size (so round i of
	// one compares with round i of another).
	RoundMs     []float64 `json:"round_ms,omitempty"`
	Interleaved bool      `json:"interleaved,omitempty"`
	// WarmupCalls were made before timing; Short says the cap stopped
	// the measurement before it had the rule's MinCalls.
	WarmupCalls int  `json:"warmup_calls,omitempty"`
	Short       bool `json:"short,omitempty"`
	// CallMs are the timed calls themselves, for merging rounds; they
	// travel between processes (gob) but are not recorded in results.
	CallMs []float64 `json:"-"`
	// Telemetry is what the device reported while the measurement ran
	// (GPU backends): "ok", or "rerun" when it throttled every time it was
	// measured, with the problems seen. Empty when nothing was monitored.
	Telemetry         string   `json:"telemetry,omitempty"`
	TelemetryProblems []string `json:"telemetry_problems,omitempty"`
}

// SampleCostMs is the robust latency per sample, what comparisons divide:
// EstimateMs (MeanMs for results recorded before it) over the batch size.
func (s Stats) SampleCostMs() float64 {
	est := s.EstimateMs
	if est <= 0 {
		est = s.MeanMs
	}
	return est / float64(max(s.BatchSize, 1))
}

// RoundCosts are the per-round costs per sample, what the noise rule
// compares; a measurement recorded without rounds is one round.
func (s Stats) RoundCosts() []float64 {
	if len(s.RoundMs) == 0 {
		if c := s.SampleCostMs(); c > 0 {
			return []float64{c}
		}
		return nil
	}
	out := make([]float64, len(s.RoundMs))
	for i, v := range s.RoundMs {
		out[i] = v / float64(max(s.BatchSize, 1))
	}
	return out
}

func msOf(durs []time.Duration) []float64 {
	ms := make([]float64, len(durs))
	for i, d := range durs {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return ms
}

// Summarise computes statistics over a set of call durations, taken as one
// round.
func Summarise(batchSize int, durs []time.Duration) Stats {
	return SummariseRounds(batchSize, [][]float64{msOf(durs)})
}

// SummariseRounds computes statistics over calls (in ms) taken in rounds:
// fences over every call, each round's estimate the mean of its calls
// within them. Stable is the whole-measurement test with the default
// MaxCV; Measure and Interleave apply their rule's.
func SummariseRounds(batchSize int, rounds [][]float64) Stats {
	var ms []float64
	for _, r := range rounds {
		ms = append(ms, r...)
	}
	st := Stats{BatchSize: batchSize, Samples: len(ms)}
	if len(ms) == 0 {
		return st
	}
	st.CallMs = ms
	mean, std := meanStd(ms)
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	st.MeanMs = mean
	st.P50Ms = percentile(sorted, 0.50)
	st.P90Ms = percentile(sorted, 0.90)
	st.P99Ms = percentile(sorted, 0.99)
	st.MinMs = sorted[0]
	st.MaxMs = sorted[len(sorted)-1]
	f := noise.TukeyFences(ms)
	est, dropped := noise.Trimmed(ms, f)
	st.EstimateMs, st.Outliers = est, dropped
	if dropped > 0 {
		st.FenceLoMs, st.FenceHiMs = max(f.Lo, 0), f.Hi
		for _, x := range ms {
			if !f.Inside(x) {
				st.OutlierMaxMs = max(st.OutlierMaxMs, x)
			}
		}
	}
	if len(rounds) > 1 {
		for _, r := range rounds {
			if len(r) == 0 {
				continue
			}
			sr := slices.Clone(r)
			slices.Sort(sr)
			st.RoundMs = append(st.RoundMs, noise.Quantile(sr, RoundQuantile))
		}
	}
	if len(st.RoundMs) >= 2 {
		// One estimate: the point is the centre of the rounds' interval
		// (what the decision's ratios compare and ThroughputInterval
		// bounds), so a figure always lies within its own interval.
		if c := noise.Center(st.RoundMs); c > 0 {
			est = c
			st.EstimateMs = c
		}
	}
	if mean > 0 {
		st.CV = noise.CVInside(ms, f)
		_ = std
	}
	if est > 0 {
		st.Throughput = float64(batchSize) * 1000 / est
	}
	// Without a rule, no minimum of calls beyond two: Measure and
	// Interleave apply their rule's.
	plain := DefaultStopRule()
	plain.MinCalls = 0
	st.setStability(plain, len(rounds), len(rounds))
	return st
}

// percentile uses linear interpolation between closest ranks on sorted data.
func percentile(sorted []float64, p float64) float64 { return noise.Quantile(sorted, p) }

func meanStd(xs []float64) (float64, float64) { return noise.MeanStd(xs) }

// WithBatch sets the batch size of statistics summarised without one.
func (s Stats) WithBatch(bs int) Stats {
	s.BatchSize = bs
	if s.EstimateMs > 0 {
		s.Throughput = float64(bs) * 1000 / s.EstimateMs
	}
	return s
}

// Human writes a figure for people (human.Number): three significant
// digits, k/M/G from 10,000, never "0" for a value that is not zero.
func Human(v float64) string { return human.Number(v) }

// ThroughputInterval is the interval of the throughput over the rounds of
// the measurement (noise.Interval of the round estimates), what a chart
// draws next to the percentiles; ok is false with fewer than two rounds.
func (s Stats) ThroughputInterval() (lo, hi float64, ok bool) {
	l, h, ok := noise.Interval(s.RoundMs)
	if !ok || s.BatchSize <= 0 {
		return 0, 0, false
	}
	return float64(s.BatchSize) * 1000 / h, float64(s.BatchSize) * 1000 / l, true
}

// RoundQuantile is the quantile of a round's calls that is its estimate.
// Under CPU contention a neighbour's preemption only ever adds time to a
// call, so a low quantile tracks the engine's own speed and is the least
// disturbed by neighbours; the lower quartile, rather than the minimum,
// so that one lucky call does not make a round.
const RoundQuantile = 0.25
