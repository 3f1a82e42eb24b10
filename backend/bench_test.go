package backend_test

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarise(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	tests := []struct {
		name string
		bs   int
		durs []time.Duration
		want backend.Stats
	}{
		{
			name: "one to ten, shuffled",
			bs:   4,
			durs: ms(7, 1, 10, 3, 5, 2, 9, 4, 8, 6),
			want: backend.Stats{BatchSize: 4, Samples: 10, MeanMs: 5.5, P50Ms: 5.5, P90Ms: 9.1, P99Ms: 9.91, MinMs: 1, MaxMs: 10,
				CV: math.Sqrt(8.25) / 5.5, Throughput: 4 * 1000 / 5.5},
		},
		{
			name: "constant",
			bs:   1,
			durs: ms(2, 2, 2, 2),
			want: backend.Stats{BatchSize: 1, Samples: 4, MeanMs: 2, P50Ms: 2, P90Ms: 2, P99Ms: 2, MinMs: 2, MaxMs: 2, Throughput: 500, Stable: true},
		},
		{
			name: "one sample",
			bs:   8,
			durs: ms(0.5),
			want: backend.Stats{BatchSize: 8, Samples: 1, MeanMs: 0.5, P50Ms: 0.5, P90Ms: 0.5, P99Ms: 0.5, MinMs: 0.5, MaxMs: 0.5, Throughput: 16000},
		},
		{
			name: "two samples interpolate",
			bs:   2,
			durs: ms(3, 1),
			want: backend.Stats{BatchSize: 2, Samples: 2, MeanMs: 2, P50Ms: 2, P90Ms: 2.8, P99Ms: 2.98, MinMs: 1, MaxMs: 3, CV: 0.5, Throughput: 1000},
		},
		{
			name: "zero durations",
			bs:   2,
			durs: ms(0, 0),
			want: backend.Stats{BatchSize: 2, Samples: 2},
		},
		{
			name: "none",
			bs:   3,
			want: backend.Stats{BatchSize: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.durs)
			got := backend.Summarise(tt.bs, tt.durs)
			w := tt.want
			if got.BatchSize != w.BatchSize || got.Samples != w.Samples || got.StopReason != "" || got.Stable != w.Stable {
				t.Errorf("got %+v, want %+v", got, w)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"mean", got.MeanMs, w.MeanMs}, {"p50", got.P50Ms, w.P50Ms}, {"p90", got.P90Ms, w.P90Ms}, {"p99", got.P99Ms, w.P99Ms},
				{"min", got.MinMs, w.MinMs}, {"max", got.MaxMs, w.MaxMs}, {"cv", got.CV, w.CV}, {"throughput", got.Throughput, w.Throughput},
			} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
				}
			}
			if !slices.Equal(in, tt.durs) {
				t.Error("Summarise reordered its argument")
			}
		})
	}
}

func TestStopRuleValidate(t *testing.T) {
	ok := backend.StopRule{Warmup: 0, Window: 2, MaxCV: 0.1, MinSamples: 2, MaxSamples: 2, MaxTime: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := backend.DefaultStopRule().Validate(); err != nil {
		t.Fatalf("the default rule is invalid: %v", err)
	}
	tests := []struct {
		name string
		edit func(r *backend.StopRule)
		want string
	}{
		{"negative warmup", func(r *backend.StopRule) { r.Warmup = -1 }, "warmup -1 is negative"},
		{"window of one", func(r *backend.StopRule) { r.Window = 1 }, "window 1 must be at least 2"},
		{"zero max_cv", func(r *backend.StopRule) { r.MaxCV = 0 }, "max_cv 0 must be positive"},
		{"min below window", func(r *backend.StopRule) { r.Window, r.MinSamples, r.MaxSamples = 5, 4, 10 }, "min_samples 4 is below the window 5"},
		{"max below min", func(r *backend.StopRule) { r.MinSamples, r.MaxSamples = 5, 4 }, "max_samples 4 is below min_samples 5"},
		{"zero max_time", func(r *backend.StopRule) { r.MaxTime = 0 }, "max_time must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.edit(&r)
			err := r.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error saying %q", err, tt.want)
			}
			if _, err := backend.Measure(context.Background(), r, 1, func() (time.Duration, error) { return time.Millisecond, nil }); err == nil {
				t.Error("Measure accepted an invalid rule")
			}
		})
	}
}

// fakeRun returns the durations of dur(i) for call i (warm-up calls
// included) and counts the calls: no clock is involved.
type fakeRun struct {
	calls int
	dur   func(i int) time.Duration
	fail  int // the call (0-based) that returns errBoom; -1 for none
}

var errBoom = errors.New("engine crashed")

func (f *fakeRun) run() (time.Duration, error) {
	i := f.calls
	f.calls++
	if i == f.fail {
		return 0, errBoom
	}
	return f.dur(i), nil
}

func constant(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// alternating is 1 ms, 3 ms, 1 ms, …: a coefficient of variation of 0.5.
func alternating(i int) time.Duration { return time.Duration(1+2*(i%2)) * time.Millisecond }

func TestMeasure(t *testing.T) {
	rule := backend.StopRule{Warmup: 3, Window: 5, MaxCV: 0.1, MinSamples: 10, MaxSamples: 100, MaxTime: time.Hour}
	tests := []struct {
		name    string
		rule    backend.StopRule
		dur     func(int) time.Duration
		calls   int // warm-up included
		samples int
		reason  string
		stable  bool
		meanMs  float64
		// estMs is the robust estimate (meanMs when 0), outliers the calls
		// outside the fences.
		estMs    float64
		outliers int
	}{
		{name: "stable at min_samples", rule: rule, dur: constant(2 * time.Millisecond),
			calls: 13, samples: 10, reason: backend.StopStable, stable: true, meanMs: 2},
		{name: "noisy stops at max_samples", rule: rule, dur: alternating,
			calls: 103, samples: 100, reason: backend.StopMaxSamples, stable: false, meanMs: 2},
		// A noisy start whose calls all fall outside the fences of a
		// steady 2 ms (20 of 100) is left out of the estimate, so it
		// cannot move the figure: outliers alone do not make a
		// measurement unstable (issue 30: they marked nearly every figure).
		{name: "outliers the estimate drops leave it stable", rule: rule,
			dur: func(i int) time.Duration {
				if i < 3+20 {
					return alternating(i)
				}
				return 2 * time.Millisecond
			},
			calls: 103, samples: 100, reason: backend.StopMaxSamples, stable: true, meanMs: 2, outliers: 20},
		// One stall in ten calls is an outlier: reported, dropped from the
		// estimate, and the measurement is stable.
		{name: "a stall is an outlier", rule: rule,
			dur: func(i int) time.Duration {
				if i == 7 {
					return 50 * time.Millisecond
				}
				return 2 * time.Millisecond
			},
			calls: 13, samples: 10, reason: backend.StopStable, stable: true, meanMs: 6.8, estMs: 2, outliers: 1},
		{name: "small noise is stable", rule: rule,
			dur:   func(i int) time.Duration { return time.Duration(1000+50*(i%2)) * time.Microsecond },
			calls: 13, samples: 10, reason: backend.StopStable, stable: true, meanMs: 1.025},
		{name: "no warm-up", rule: backend.StopRule{Window: 2, MaxCV: 0.1, MinSamples: 2, MaxSamples: 2, MaxTime: time.Hour},
			dur: alternating, calls: 2, samples: 2, reason: backend.StopMaxSamples, stable: false, meanMs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRun{dur: tt.dur, fail: -1}
			st, err := backend.Measure(context.Background(), tt.rule, 4, f.run)
			if err != nil {
				t.Fatal(err)
			}
			if f.calls != tt.calls || st.Samples != tt.samples || st.StopReason != tt.reason || st.Stable != tt.stable || st.BatchSize != 4 {
				t.Errorf("calls %d, stats %+v; want calls %d, samples %d, reason %s, stable %v", f.calls, st, tt.calls, tt.samples, tt.reason, tt.stable)
			}
			est := cmp.Or(tt.estMs, tt.meanMs)
			if !near(st.MeanMs, tt.meanMs) || !near(st.Throughput, 4*1000/est) || st.Outliers != tt.outliers {
				t.Errorf("mean %v ms, throughput %v, %d outliers; want %v ms, estimate %v ms, %d outliers", st.MeanMs, st.Throughput, st.Outliers, tt.meanMs, est, tt.outliers)
			}
		})
	}
}

func TestMeasureErrors(t *testing.T) {
	rule := backend.StopRule{Warmup: 3, Window: 5, MaxCV: 0.1, MinSamples: 10, MaxSamples: 100, MaxTime: time.Hour}
	for _, fail := range []int{0, 2, 3, 7} {
		f := &fakeRun{dur: constant(time.Millisecond), fail: fail}
		st, err := backend.Measure(context.Background(), rule, 1, f.run)
		if !errors.Is(err, errBoom) {
			t.Errorf("run failing at call %d: Measure = %+v, %v", fail, st, err)
		}
		if f.calls != fail+1 {
			t.Errorf("run failing at call %d: Measure called it %d times", fail, f.calls)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeRun{fail: -1, dur: func(i int) time.Duration {
		if i == 5 {
			cancel()
		}
		return alternating(i)
	}}
	if _, err := backend.Measure(ctx, rule, 1, f.run); !errors.Is(err, context.Canceled) {
		t.Errorf("Measure after cancel = %v", err)
	}
	if f.calls != 6 {
		t.Errorf("Measure called run %d times after the context ended at call 6", f.calls)
	}
}

// With a run that takes longer than MaxTime, the rule's time limit ends
// the measurement after the first timed call.
func TestMeasureTimeLimit(t *testing.T) {
	rule := backend.StopRule{Warmup: 1, Window: 5, MaxCV: 0.1, MinSamples: 10, MaxSamples: 100, MaxTime: time.Millisecond}
	calls := 0
	st, err := backend.Measure(context.Background(), rule, 1, func() (time.Duration, error) {
		calls++
		time.Sleep(2 * time.Millisecond) // at least MaxTime, whatever the machine
		return 5 * time.Millisecond, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.StopReason != backend.StopTimeLimit || st.Samples != 1 || calls != 2 || st.Stable {
		t.Errorf("calls %d, stats %+v; want one timed call stopped by the time limit", calls, st)
	}
}

// fakeMeasure serves Stats per batch size from a table and records the
// sizes measured.
type fakeMeasure struct {
	throughput map[int]float64
	latencyMs  map[int]float64
	fail       map[int]error
	measured   []int
}

func (f *fakeMeasure) measure(ctx context.Context, bs int) (backend.Stats, error) {
	f.measured = append(f.measured, bs)
	if err := f.fail[bs]; err != nil {
		return backend.Stats{}, err
	}
	st := backend.Stats{BatchSize: bs, Throughput: f.throughput[bs], MeanMs: f.latencyMs[bs]}
	if st.MeanMs == 0 && st.Throughput > 0 {
		st.MeanMs = float64(bs) * 1000 / st.Throughput
	}
	return st, nil
}

func batchSizesOf(stats []backend.Stats) []int {
	var out []int
	for _, s := range stats {
		out = append(out, s.BatchSize)
	}
	return out
}

func TestSweep(t *testing.T) {
	sizes := []int{1, 2, 4, 8, 16, 32, 64}
	tests := []struct {
		name     string
		rule     backend.SweepRule
		fm       fakeMeasure
		measured []int
		kept     []int
		err      error
	}{
		{
			name:     "stops after the back-off limit of saturated sizes",
			rule:     backend.DefaultSweepRule(),
			fm:       fakeMeasure{throughput: map[int]float64{1: 100, 2: 190, 4: 360, 8: 370, 16: 375, 32: 372, 64: 2000}},
			measured: []int{1, 2, 4, 8, 16, 32},
			kept:     []int{1, 2, 4, 8, 16, 32},
		},
		{
			name:     "a real gain resets the count",
			rule:     backend.DefaultSweepRule(),
			fm:       fakeMeasure{throughput: map[int]float64{1: 100, 2: 101, 4: 102, 8: 200, 16: 201, 32: 202, 64: 203}},
			measured: []int{1, 2, 4, 8, 16, 32, 64},
			kept:     []int{1, 2, 4, 8, 16, 32, 64},
		},
		{
			name:     "falling throughput saturates too",
			rule:     backend.SweepRule{MinGain: 0.05, BackoffLimit: 1},
			fm:       fakeMeasure{throughput: map[int]float64{1: 100, 2: 300, 4: 250, 8: 200, 16: 900}},
			measured: []int{1, 2, 4, 8},
			kept:     []int{1, 2, 4, 8},
		},
		{
			name:     "back-off limit 0 stops at the first saturated size",
			rule:     backend.SweepRule{MinGain: 0.05, BackoffLimit: 0},
			fm:       fakeMeasure{throughput: map[int]float64{1: 100, 2: 200, 4: 201, 8: 800}},
			measured: []int{1, 2, 4},
			kept:     []int{1, 2, 4},
		},
		{
			name:     "never saturated measures every size",
			rule:     backend.DefaultSweepRule(),
			fm:       fakeMeasure{throughput: map[int]float64{1: 1, 2: 2, 4: 4, 8: 8, 16: 16, 32: 32, 64: 64}},
			measured: sizes,
			kept:     sizes,
		},
		{
			name: "stops once latency exceeds the budget",
			rule: backend.SweepRule{MinGain: 0.05, BackoffLimit: 2, LatencyBudgetMs: 4},
			fm: fakeMeasure{
				throughput: map[int]float64{1: 1000, 2: 1500, 4: 2000, 8: 2500},
				latencyMs:  map[int]float64{1: 1, 2: 2, 4: 4.5, 8: 9},
			},
			measured: []int{1, 2, 4},
			kept:     []int{1, 2, 4},
		},
		{
			name: "latency at the budget is within it",
			rule: backend.SweepRule{MinGain: 0.05, BackoffLimit: 2, LatencyBudgetMs: 4},
			fm: fakeMeasure{
				throughput: map[int]float64{1: 1000, 2: 1500, 4: 2000, 8: 2500, 16: 3000, 32: 3500, 64: 4000},
				latencyMs:  map[int]float64{1: 1, 2: 2, 4: 4, 8: 5},
			},
			measured: []int{1, 2, 4, 8},
			kept:     []int{1, 2, 4, 8},
		},
		{
			name: "a failing size is an error, with what was measured before it",
			rule: backend.DefaultSweepRule(),
			fm: fakeMeasure{
				throughput: map[int]float64{1: 100, 2: 200, 4: 400, 8: 800},
				fail:       map[int]error{4: errBoom},
			},
			measured: []int{1, 2, 4},
			kept:     []int{1, 2},
			err:      errBoom,
		},
		{
			name:     "a failing first size is an error",
			rule:     backend.DefaultSweepRule(),
			fm:       fakeMeasure{fail: map[int]error{1: errBoom}},
			measured: []int{1},
			kept:     nil,
			err:      errBoom,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := backend.Sweep(context.Background(), sizes, tt.rule, tt.fm.measure)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Sweep error = %v, want %v", err, tt.err)
			}
			if !slices.Equal(tt.fm.measured, tt.measured) {
				t.Errorf("measured %v, want %v", tt.fm.measured, tt.measured)
			}
			if k := batchSizesOf(got); !slices.Equal(k, tt.kept) {
				t.Errorf("kept %v, want %v", k, tt.kept)
			}
		})
	}
}

func TestSweepContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var measured []int
	got, err := backend.Sweep(ctx, []int{1, 2, 4, 8}, backend.DefaultSweepRule(), func(ctx context.Context, bs int) (backend.Stats, error) {
		measured = append(measured, bs)
		if bs == 4 {
			cancel()
			return backend.Stats{}, ctx.Err()
		}
		return backend.Stats{BatchSize: bs, Throughput: float64(bs) * 100, MeanMs: 10}, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Sweep after cancel: %v", err)
	}
	if !slices.Equal(measured, []int{1, 2, 4}) || !slices.Equal(batchSizesOf(got), []int{1, 2}) {
		t.Errorf("measured %v, kept %v", measured, batchSizesOf(got))
	}

	if got, err := backend.Sweep(context.Background(), nil, backend.DefaultSweepRule(), nil); got != nil || err != nil {
		t.Errorf("Sweep of no sizes = %v, %v", got, err)
	}
}

// The context's CallProgress hears every timed call, counted from 1, and
// never the warm-up: a display shows calls measured, not calls made.
func TestMeasureReportsCalls(t *testing.T) {
	rule := backend.StopRule{Warmup: 3, Window: 5, MaxCV: 0.1, MinSamples: 10, MaxSamples: 100, MaxTime: time.Hour}
	var heard []int
	ctx := backend.WithCallProgress(context.Background(), func(n int) { heard = append(heard, n) })
	f := &fakeRun{dur: constant(2 * time.Millisecond), fail: -1}
	st, err := backend.Measure(ctx, rule, 1, f.run)
	if err != nil {
		t.Fatal(err)
	}
	if len(heard) != st.Samples || heard[0] != 1 || heard[len(heard)-1] != st.Samples {
		t.Errorf("progress heard %v for %d timed calls (and %d warm-up)", heard, st.Samples, rule.Warmup)
	}
	if backend.CallProgressFrom(context.Background()) != nil {
		t.Error("a bare context has a CallProgress")
	}
}

// Warm-up is bounded by time as well as by calls, and a measurement goes
// past its time to reach MinCalls unless the cap stops it, which it then
// says (Short). The calls here "take" 1 s each as far as the clock says.
func TestMeasureSlowModel(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rule          backend.StopRule
		warm, samples int
		short         bool
		reason        string
	}{
		{"min calls within the cap", backend.StopRule{Warmup: 10, WarmupTime: time.Second, Window: 2, MaxCV: 0.1, MinSamples: 100, MaxSamples: 1000,
			MaxTime: 2 * time.Second, MinCalls: 4, CapTime: 10 * time.Second}, 1, 4, false, backend.StopTimeLimit},
		{"the cap stops it short", backend.StopRule{Warmup: 10, WarmupTime: time.Second, Window: 2, MaxCV: 0.1, MinSamples: 100, MaxSamples: 1000,
			MaxTime: 2 * time.Second, MinCalls: 10, CapTime: 3 * time.Second}, 1, 3, true, backend.StopTimeCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Duration(0)
			restore := backend.SetClock(func() time.Duration { return clock })
			defer restore()
			calls := 0
			st, err := backend.Measure(context.Background(), tc.rule, 1, func() (time.Duration, error) {
				calls++
				clock += time.Second
				return time.Second, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if st.WarmupCalls != tc.warm || st.Samples != tc.samples || st.Short != tc.short || st.StopReason != tc.reason {
				t.Errorf("warm-up %d, timed %d, short %v, reason %s; want %d, %d, %v, %s", st.WarmupCalls, st.Samples, st.Short, st.StopReason, tc.warm, tc.samples, tc.short, tc.reason)
			}
			if st.Short && st.Stable {
				t.Error("a short measurement is marked stable")
			}
		})
	}
}

// Interleave takes the candidates' rounds in alternation (every candidate
// once per round, in an order shuffled per round by the seed, the same
// order for the same seed), warms up in the first round only, and gives
// each candidate its rounds' estimates.
func TestInterleaveAlternatesRounds(t *testing.T) {
	rule := backend.StopRule{Warmup: 2, Window: 2, MaxCV: 0.1, MinSamples: 2, MaxSamples: 40, MaxTime: time.Second, Rounds: 4}
	order := func(seed uint64) ([]int, []backend.Stats) {
		var got []int
		stats, errs, err := backend.Interleave(context.Background(), rule, seed, 3, func(ctx context.Context, i int, r backend.StopRule) (backend.Stats, error) {
			got = append(got, i)
			if len(got) <= 3 && r.Warmup != 2 || len(got) > 3 && r.Warmup != 0 {
				t.Errorf("call %d: warm-up %d", len(got), r.Warmup)
			}
			f := &fakeRun{dur: constant(time.Duration(i+1) * time.Millisecond), fail: -1}
			return backend.Measure(ctx, r, 1, f.run)
		})
		if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
			t.Fatal(err, errs)
		}
		return got, stats
	}
	a, stats := order(42)
	b, _ := order(42)
	if len(a) != 12 || !slices.Equal(a, b) {
		t.Fatalf("order %v then %v: want 4 rounds of 3, the same for the same seed", a, b)
	}
	for r := range 4 {
		round := slices.Clone(a[3*r : 3*r+3])
		slices.Sort(round)
		if !slices.Equal(round, []int{0, 1, 2}) {
			t.Errorf("round %d measured %v", r, a[3*r:3*r+3])
		}
	}
	for i, st := range stats {
		if len(st.RoundMs) != 4 || !st.Interleaved || !near(st.EstimateMs, float64(i+1)) || st.Samples != 40 {
			t.Errorf("candidate %d: %+v", i, st)
		}
	}
}
