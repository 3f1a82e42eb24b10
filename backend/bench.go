package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/noise"
)

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

// Measure calls run until rule says stop and returns the statistics of the
// timed calls, as one round. run performs one call and returns its
// duration, so that the caller times exactly the engine call and nothing
// around it. The context's CallProgress, if any, hears the count after
// every timed call (outside the timed region).
func Measure(ctx context.Context, rule StopRule, batchSize int, run func() (time.Duration, error)) (Stats, error) {
	if err := rule.Validate(); err != nil {
		return Stats{}, err
	}
	progress := CallProgressFrom(ctx)
	warm := 0
	warmStart := clock()
	for warm < rule.Warmup && (warm == 0 || clock()-warmStart < rule.WarmupLimit()) {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		if _, err := run(); err != nil {
			return Stats{}, err
		}
		warm++
	}
	durs := make([]time.Duration, 0, min(rule.MaxSamples, 4096))
	start := clock()
	reason := ""
	nextCheck := rule.MinSamples
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
		elapsed := clock() - start
		switch {
		case n >= nextCheck && StableCalls(msOf(durs), rule.MaxCV):
			reason = StopStable
		case n >= rule.MaxSamples:
			reason = StopMaxSamples
		case elapsed >= rule.MaxTime && n >= rule.MinCalls:
			reason = StopTimeLimit
		case elapsed >= rule.CapLimit():
			reason = StopTimeCap
		}
		if n >= nextCheck {
			// The whole measurement is checked, which costs a sort: every
			// tenth more calls, not every call.
			nextCheck = n + max(rule.Window, n/10)
		}
	}
	st := Summarise(batchSize, durs)
	st.StopReason = reason
	st.WarmupCalls = warm
	st.Short = len(durs) < rule.MinCalls
	st.setStability(rule, 1, 1)
	return st, nil
}

// clock is the time since some fixed moment; tests replace it to play a
// model whose calls take seconds without waiting for them.
var clock = func() time.Duration { return time.Since(epoch) }

var epoch = time.Now()

func msOf(durs []time.Duration) []float64 {
	ms := make([]float64, len(durs))
	for i, d := range durs {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return ms
}

// StableCalls is the test that may end a measurement early (Measure,
// Interleave): the spread within the fences at most maxCV, and at most a
// tenth of the calls outliers (or the spread of every call at most
// maxCV). It is not what marks a figure unstable (Stats.Unstable): a
// measurement stops early only when it is plainly settled.
func StableCalls(ms []float64, maxCV float64) bool {
	if len(ms) < 2 {
		return false
	}
	f := noise.TukeyFences(ms)
	est, dropped := noise.Trimmed(ms, f)
	if !(est > 0) || noise.CVInside(ms, f) > maxCV {
		return false
	}
	// Outliers are a tenth of the calls at most, or so close to the rest
	// that every call together is within maxCV (a tight distribution's
	// fences are tight: a 5 % level shift lies outside them).
	m, sd := noise.MeanStd(ms)
	return dropped*10 <= len(ms) || sd <= maxCV*m
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

// Interleave measures n engines (or batch sizes) in alternating rounds:
// in every round each one still measuring is timed for its share of the
// rule (MaxTime/Rounds, MaxSamples/Rounds calls), in an order shuffled per
// round by a generator seeded with seed (recorded, so an order can be
// replayed), so that drift and a neighbour's load hit all of them alike.
// measure takes one round of engine i under the rule it is given (warm-up
// in the first round only) and returns its calls (Stats.CallMs). The
// result has each engine's statistics over all its rounds, with the
// rounds' estimates; an engine whose measurement fails has its error in
// errs and takes no further rounds.
func Interleave(ctx context.Context, rule StopRule, seed uint64, n int, measure func(ctx context.Context, i int, round StopRule) (Stats, error)) ([]Stats, []error, error) {
	if err := rule.Validate(); err != nil {
		return nil, nil, err
	}
	rounds := rule.RoundCount()
	per := rule
	per.Rounds, per.MinCalls = 1, 1
	per.MaxTime = max(rule.MaxTime/time.Duration(rounds), 1)
	per.CapTime = per.MaxTime
	per.MaxSamples = max((rule.MaxSamples+rounds-1)/rounds, 2)
	per.MinSamples, per.Window = per.MaxSamples, 2 // a round runs its share; stability is judged over all rounds
	calls := make([][][]float64, n)
	warm := make([]int, n)
	spent := make([]time.Duration, n)
	errs := make([]error, n)
	rng := rand.New(rand.NewPCG(seed, 0x77696e6e657273)) // "winners"
	reason := StopRounds
	for r := 0; ; r++ {
		for _, i := range rng.Perm(n) {
			if errs[i] != nil || r > 0 && spent[i] >= rule.CapLimit() {
				continue // failed, or out of time: a slow model's cap
			}
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			rr := per
			if r > 0 {
				rr.Warmup = 0
			} else {
				rr.WarmupTime = rule.WarmupLimit()
			}
			began := clock()
			st, err := measure(ctx, i, rr)
			spent[i] += clock() - began
			if err != nil {
				errs[i] = err
				continue
			}
			if r == 0 {
				warm[i] = st.WarmupCalls
			}
			calls[i] = append(calls[i], st.CallMs)
		}
		done := true
		allStable := r+1 >= min(rounds, 5)
		for i := range n {
			if errs[i] != nil {
				continue
			}
			got := countCalls(calls[i])
			capped := spent[i] >= rule.CapLimit()
			if !capped && (r+1 < rounds || got < rule.MinCalls) {
				done = false
			}
			allStable = allStable && got >= rule.MinSamples && StableCalls(flatten(calls[i]), rule.MaxCV)
		}
		if allStable {
			reason = StopStable
			break
		}
		if done {
			break
		}
	}
	out := make([]Stats, n)
	for i := range n {
		if errs[i] != nil {
			continue
		}
		st := SummariseRounds(0, calls[i])
		st.Interleaved = n > 1
		st.StopReason = reason
		st.WarmupCalls = warm[i]
		st.Short = st.Samples < rule.MinCalls
		if st.Short {
			st.StopReason = StopTimeCap
		}
		// Rounds the cap cut off count against it; rounds not taken
		// because every candidate was settled early do not.
		want := rounds
		if reason == StopStable {
			want = len(calls[i])
		}
		st.setStability(rule, len(calls[i]), want)
		out[i] = st
	}
	return out, errs, nil
}

// OneShot is implemented by engines whose every Benchmark call pays a
// large fixed cost (trtexec loads the engine and starts a process each
// time): they are measured in one call under the whole rule rather than in
// interleaved rounds, and their calls are cut into rounds afterwards
// (SplitRounds), so that their figures carry a spread all the same.
type OneShot interface{ MeasuresOnce() bool }

// SplitRounds cuts a measurement taken in one go into rounds of
// consecutive calls and summarises it again.
func SplitRounds(st Stats, rounds int) Stats {
	if len(st.CallMs) == 0 || rounds < 2 {
		return st
	}
	rounds = min(rounds, len(st.CallMs))
	var parts [][]float64
	for i := range rounds {
		parts = append(parts, st.CallMs[i*len(st.CallMs)/rounds:(i+1)*len(st.CallMs)/rounds])
	}
	out := SummariseRounds(st.BatchSize, parts)
	out.StopReason, out.WarmupCalls, out.Short = st.StopReason, st.WarmupCalls, st.Short
	out.Stable, out.UnstableCause = st.Stable, st.UnstableCause
	if out.Stable {
		// The measurement was settled as a whole; its rounds, cut
		// afterwards, may still disagree (a drift within it).
		plain := DefaultStopRule()
		plain.MinCalls = 0
		out.setStability(plain, rounds, rounds)
	}
	out.Telemetry, out.TelemetryProblems = st.Telemetry, st.TelemetryProblems
	return out
}

// WithBatch sets the batch size of statistics summarised without one.
func (s Stats) WithBatch(bs int) Stats {
	s.BatchSize = bs
	if s.EstimateMs > 0 {
		s.Throughput = float64(bs) * 1000 / s.EstimateMs
	}
	return s
}

func countCalls(rounds [][]float64) int {
	n := 0
	for _, r := range rounds {
		n += len(r)
	}
	return n
}

func flatten(rounds [][]float64) []float64 {
	var out []float64
	for _, r := range rounds {
		out = append(out, r...)
	}
	return out
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

// MaxRoundSpread is how far the interval of a figure (ThroughputInterval,
// from its rounds' estimates at noise.Level) may reach on either side of
// the figure, as a fraction of it, before the rounds are said to
// disagree: twice the smallest difference a decision resolves
// (noise.MinGain). At one MinGain the A/A bench on the machine alone
// marked 11–47 % of figures: a 99 % interval from 5 to 10 rounds of
// 20 ms is wider than ±5 % for a tenth of sub-millisecond measurements
// whose figure moves run to run by far less; past ±10 % the figure
// cannot tell a 10 % difference, which is what a reader must hear.
const MaxRoundSpread = 2 * noise.MinGain

// Unstable is why the measurement s is unstable, or "" when it is
// stable: the first of these that holds, in this order.
//
//   - "fewer than N calls (n)": fewer timed calls than rule.MinCalls (at
//     least 2), or marked Short: the cap cut it short;
//   - "no time measured": calls that took no measurable time;
//   - "cut off by the cap after r of R rounds": the cap stopped it before
//     it had taken the rounds it should have (taken of want);
//   - "cv X > Y": the calls within Tukey's fences vary by more than
//     rule.MaxCV (outliers do not count: the estimate leaves them out);
//   - "rounds disagree (±X % > ±Y %)": the interval of the figure from its
//     rounds reaches further than MaxRoundSpread from it.
//
// Each is something that could move the figure; nothing else (how many
// outliers the fences dropped, for one) makes it unstable.
func (s Stats) Unstable(rule StopRule, taken, want int) string {
	minCalls := max(rule.MinCalls, 2)
	switch {
	case s.Samples < minCalls || s.Short:
		return fmt.Sprintf("fewer than %d calls (%d)", minCalls, s.Samples)
	case !(s.SampleCostMs() > 0):
		return "no time measured"
	case taken < want:
		return fmt.Sprintf("cut off by the cap after %d of %d rounds", taken, want)
	case s.CV > rule.MaxCV:
		if rule.MaxCV < 0.01 {
			return fmt.Sprintf("cv %.2g > %.2g", s.CV, rule.MaxCV)
		}
		return fmt.Sprintf("cv %.2f > %.2f", s.CV, rule.MaxCV)
	}
	if sp, ok := s.RoundSpread(); ok && sp > MaxRoundSpread {
		return fmt.Sprintf("rounds disagree (±%.1f %% > ±%g %%)", sp*100, MaxRoundSpread*100)
	}
	return ""
}

// RoundSpread is how far the figure's interval from its rounds reaches on
// either side of it (the larger side), as a fraction of the figure; ok is
// false without an interval.
func (s Stats) RoundSpread() (float64, bool) {
	lo, hi, ok := noise.Interval(s.RoundMs)
	c := noise.Center(s.RoundMs)
	if !ok || !(c > 0) {
		return 0, false
	}
	return max(hi/c-1, 1-lo/c), true
}

// setStability sets Stable and UnstableCause by Unstable.
func (s *Stats) setStability(rule StopRule, taken, want int) {
	s.UnstableCause = s.Unstable(rule, taken, want)
	s.Stable = s.UnstableCause == ""
}

// Cause is the cause of an unstable measurement: "" for a stable one,
// "cause not recorded" for one recorded before causes were.
func (s Stats) Cause() string {
	switch {
	case s.Stable:
		return ""
	case s.UnstableCause != "":
		return s.UnstableCause
	}
	return "cause not recorded"
}

// Advice is what helps against an unstable measurement's cause (Unstable's
// conditions), for footnotes: the advice that fits the condition that
// fired, not a list of possibilities.
func Advice(cause string) string {
	switch {
	case strings.HasPrefix(cause, "fewer than"):
		return "its calls are slow for the bench time: a longer --bench-time gives it more calls"
	case strings.HasPrefix(cause, "cut off by the cap"):
		return "its calls are slow for the bench time and the cap (five times it) cut its rounds off: a longer --bench-time gives it room"
	case strings.HasPrefix(cause, "no time measured"):
		return "its calls took no time the clock could measure"
	case strings.HasPrefix(cause, "cv "):
		return "its calls vary more than max_cv allows: a quieter machine helps"
	case strings.HasPrefix(cause, "rounds disagree"):
		return "its speed changed between rounds (a neighbour's load came and went): a quieter machine helps"
	}
	return "recorded before causes were: measure it again to know"
}
