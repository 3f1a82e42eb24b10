package backend

import (
	"context"
	"math/rand/v2"
	"time"
)

// rounds afterwards (SplitRounds).

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
