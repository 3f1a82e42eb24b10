package strategy

import (
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/noise"
)

// The profiling strategies (AITune's ProfilingTuneStrategy family) build
// and measure every candidate and keep the best by a strict comparison, so
// the earlier candidate wins ties. Without a TorchEager baseline there is no
// "best must beat eager" rule and no eager fallback.

// maxThroughput is AITune's MaxThroughputStrategy.
type maxThroughput struct{}

func (maxThroughput) Name() string             { return MaxThroughput }
func (maxThroughput) LatencyBudgetMs() float64 { return 0 }

func (maxThroughput) CheckCandidates(cs []backend.Candidate) error {
	return atLeastOne(MaxThroughput, cs)
}

func (maxThroughput) Plan(batchSizes []int) Plan { return sweepPlan(batchSizes) }

// Done never early: every candidate must be measured to know the best.
func (maxThroughput) Done([]backend.CandidateResult) bool { return false }

func (maxThroughput) Select(results []backend.CandidateResult) (Selection, error) {
	if len(results) == 0 {
		return Selection{}, errNoResults
	}
	measure := func(r backend.CandidateResult) (backend.Stats, bool) { return bestThroughput(r, 0) }
	best, _, found := pick(results, MetricThroughput, measure, throughputOf, higher)
	if !found {
		return Selection{}, noWinner("no correct backend found", results, "", unmeasured)
	}
	return best.final(fmt.Sprintf("%sthroughput %s samples/s at batch %d", best.best("highest"), backend.Human(best.Value), best.BatchSize) + best.decisionText()), nil
}

// minLatency is AITune's MinLatencyStrategy: one batch size, lowest mean
// latency.
type minLatency struct{}

func (minLatency) Name() string             { return MinLatency }
func (minLatency) LatencyBudgetMs() float64 { return 0 }

func (minLatency) CheckCandidates(cs []backend.Candidate) error {
	return atLeastOne(MinLatency, cs)
}

// Plan measures the smallest batch size only: 1 whenever the graph accepts
// it (AITune uses [1]; a graph whose batch axis starts above 1 cannot run
// batch 1, and its smallest batch is the nearest thing). A graph without a
// batch axis runs its recorded sample as is. With a single batch size there
// is nothing for a sweep rule to stop, so Sweep is the zero rule.
func (minLatency) Plan(batchSizes []int) Plan {
	if len(batchSizes) == 0 {
		return Plan{}
	}
	return Plan{BatchSizes: []int{slices.Min(batchSizes)}}
}

func (minLatency) Done([]backend.CandidateResult) bool { return false }

func (minLatency) Select(results []backend.CandidateResult) (Selection, error) {
	if len(results) == 0 {
		return Selection{}, errNoResults
	}
	best, _, found := pick(results, MetricLatencyMs, smallestBatch, latencyOf, lower)
	if !found {
		return Selection{}, noWinner("no correct backend found", results, "", unmeasured)
	}
	return best.final(fmt.Sprintf("%slatency %s ms at batch %d", best.best("lowest"), backend.Human(best.Value), best.BatchSize) + best.decisionText()), nil
}

// smallestBatch returns the measured benchmark with the smallest batch size:
// the one Plan asked for. Choosing by batch size rather than taking the
// first keeps candidates comparable should a result carry more than the
// plan. A benchmark with no mean latency measured nothing.
func smallestBatch(r backend.CandidateResult) (backend.Stats, bool) {
	var best backend.Stats
	ok := false
	for _, s := range r.Benchmarks {
		if s.MeanMs <= 0 {
			continue
		}
		if !ok || s.BatchSize < best.BatchSize {
			best, ok = s, true
		}
	}
	return best, ok
}

// latencyBudget is AITune's LatencyBudgetStrategy: the highest throughput
// among batch sizes whose mean latency is within the budget.
type latencyBudget struct{ budgetMs float64 }

func (latencyBudget) Name() string               { return LatencyBudget }
func (s latencyBudget) LatencyBudgetMs() float64 { return s.budgetMs }

func (latencyBudget) CheckCandidates(cs []backend.Candidate) error {
	return atLeastOne(LatencyBudget, cs)
}

// Plan sweeps like max-throughput and also stops once a batch size's mean
// latency exceeds the budget: larger batches only take longer.
func (s latencyBudget) Plan(batchSizes []int) Plan {
	p := sweepPlan(batchSizes)
	p.Sweep.LatencyBudgetMs = s.budgetMs
	return p
}

func (latencyBudget) Done([]backend.CandidateResult) bool { return false }

func (s latencyBudget) Select(results []backend.CandidateResult) (Selection, error) {
	if len(results) == 0 {
		return Selection{}, errNoResults
	}
	var (
		fastest      backend.Stats // lowest mean latency seen, for the message
		fastestOf    string
		measuredSome bool
	)
	for _, r := range results {
		if !r.Passed() {
			continue
		}
		if st, ok := smallestLatency(r); ok && (!measuredSome || st.MeanMs < fastest.MeanMs) {
			fastest, fastestOf, measuredSome = st, r.Candidate, true
		}
	}
	// A candidate with no batch size within the budget does not qualify.
	measure := func(r backend.CandidateResult) (backend.Stats, bool) { return bestThroughput(r, s.budgetMs) }
	best, st, found := pick(results, MetricThroughput, measure, throughputOf, higher)
	if found {
		return best.final(fmt.Sprintf("%sthroughput %s samples/s at batch %d within the %g ms budget (mean %s ms)",
			best.best("highest"), backend.Human(st.Throughput), st.BatchSize, s.budgetMs, backend.Human(st.MeanMs)) + best.decisionText()), nil
	}
	if !measuredSome {
		return Selection{}, noWinner("no correct backend found", results, "", unmeasured)
	}
	// Some candidates ran correctly but all too slowly. That is a property of
	// the model, the candidates and the machine, not a fluke: a retry gives
	// the same answer, so the class is a deterministic one. FailRuntime is
	// the closest (the engines ran, and running was the problem);
	// FailWrongAnswer would send a reader looking for numerical errors, and
	// FailBuild for build errors (even when other candidates did fail to
	// build: they are not why nothing won). noWinner still upgrades it to
	// infrastructure when another candidate failed retryably, as that one
	// might have met the budget.
	headline := fmt.Sprintf("no candidate met the latency budget of %g ms (fastest mean latency %.4g ms: %s at batch %d)",
		s.budgetMs, fastest.MeanMs, fastestOf, fastest.BatchSize)
	return Selection{}, noWinner(headline, results, backend.FailRuntime, s.overBudget)
}

// overBudget says how close a passed candidate came to the budget.
func (s latencyBudget) overBudget(r backend.CandidateResult) string {
	st, ok := smallestLatency(r)
	if !ok {
		return "nothing was measured"
	}
	return fmt.Sprintf("no batch size within the budget (fastest mean %.4g ms at batch %d)", st.MeanMs, st.BatchSize)
}

// smallestLatency returns a result's benchmark with the lowest mean
// latency.
func smallestLatency(r backend.CandidateResult) (backend.Stats, bool) {
	var best backend.Stats
	ok := false
	for _, s := range r.Benchmarks {
		if s.MeanMs > 0 && (!ok || s.MeanMs < best.MeanMs) {
			best, ok = s, true
		}
	}
	return best, ok
}

// pick chooses among the passed, measured results. The best by point
// estimate is found with a strict comparison (the earlier candidate wins an
// exact tie, as in AITune's _is_better); it wins outright only when it
// beats every other beyond noise (noise.CompareCosts over the rounds of
// the two measurements, lower bound above 1 + noise.MinGain). Otherwise
// the candidates within noise of it are a tie, and the tie-break picks the
// first of them in candidate order (the order the strategy was given them,
// which is the order a user ranks them in), deterministically whatever the
// noise did to the point estimates.
func pick(results []backend.CandidateResult, metric string, measure func(backend.CandidateResult) (backend.Stats, bool),
	score func(backend.Stats) float64, better func(a, b float64) bool) (Selection, backend.Stats, bool) {
	type entry struct {
		i  int
		st backend.Stats
		v  float64
	}
	var all []entry
	best := -1
	for i, r := range results {
		if !r.Passed() {
			continue
		}
		st, ok := measure(r)
		if !ok {
			continue // passed but unmeasured: nothing to compare
		}
		all = append(all, entry{i, st, score(st)})
		if best < 0 || better(score(st), all[best].v) {
			best = len(all) - 1
		}
	}
	if best < 0 {
		return Selection{}, backend.Stats{}, false
	}
	b := all[best]
	sel := Selection{Index: b.i, Candidate: results[b.i].Candidate, Metric: metric, Value: b.v, BatchSize: b.st.BatchSize}
	if len(all) == 1 {
		sel.Decision = DecisionAlone
		return sel, b.st, true
	}
	// Which candidates the best does not beat beyond noise, and the
	// runner-up by point estimate.
	tied := []entry{}
	runnerUp := -1
	ratios := map[int]noise.Ratio{}
	for k, e := range all {
		if k == best {
			tied = append(tied, e)
			continue
		}
		r := Compare(b.st, e.st)
		ratios[k] = r
		if r.Decide(noise.MinGain) != noise.Better {
			tied = append(tied, e)
		}
		if runnerUp < 0 || better(e.v, all[runnerUp].v) {
			runnerUp = k
		}
	}
	if len(tied) == 1 {
		r := ratios[runnerUp]
		sel.Decision, sel.RunnerUp, sel.Margin = DecisionBeyondNoise, results[all[runnerUp].i].Candidate, &r
		return sel, b.st, true
	}
	// A tie: the first in candidate order among the tied wins.
	w := tied[0]
	for _, e := range tied {
		if e.i < w.i {
			w = e
		}
	}
	for _, e := range tied {
		sel.Tied = append(sel.Tied, results[e.i].Candidate)
	}
	sel.Tied = tiedInOrder(results, sel.Tied)
	// The runner-up is the fastest other tied candidate (the fastest of
	// all when the tie-break did not pick it) that is not the winner's
	// own engine: an identical engine shares the winner's measurement, and
	// a ratio of a measurement with itself says nothing.
	other := entry{i: -1}
	var identical []string
	for _, e := range tied {
		switch {
		case e.i == w.i:
		case engineOf(results[e.i]) == engineOf(results[w.i]):
			identical = append(identical, results[e.i].Candidate)
		case other.i < 0 || better(e.v, other.v):
			other = e
		}
	}
	sel = Selection{Index: w.i, Candidate: results[w.i].Candidate, Metric: metric, Value: w.v, BatchSize: w.st.BatchSize,
		Decision: DecisionTie, Tied: sel.Tied, TieBreak: TieBreakOrder, Identical: tiedInOrder(results, identical),
		notFastest: better(b.v, w.v)}
	if other.i >= 0 {
		r := Compare(w.st, other.st)
		sel.RunnerUp, sel.Margin, sel.runnerUpValue = results[other.i].Candidate, &r, other.v
	}
	return sel, w.st, true
}

// engineOf names a result's engine: the candidate whose engine it shares
// (measured once), else its own.
func engineOf(r backend.CandidateResult) string {
	if r.SameEngineAs != "" {
		return r.SameEngineAs
	}
	return r.Candidate
}

// tiedInOrder lists names in the results' (candidate) order.
func tiedInOrder(results []backend.CandidateResult, names []string) []string {
	var out []string
	for _, r := range results {
		if slices.Contains(names, r.Candidate) {
			out = append(out, r.Candidate)
		}
	}
	return out
}

// Compare is how much better measurement a is than b (>1: a is faster per
// sample), with its interval, by the one noise rule: round by round when
// both were measured in the same interleaved rounds (same batch size,
// same number of rounds), by Welch's interval otherwise.
func Compare(a, b backend.Stats) noise.Ratio {
	paired := a.Interleaved && b.Interleaved && a.BatchSize == b.BatchSize && len(a.RoundMs) == len(b.RoundMs)
	return noise.CompareCosts(a.RoundCosts(), b.RoundCosts(), paired)
}

func throughputOf(s backend.Stats) float64 { return s.Throughput }

// latencyOf is the robust latency of one call (the mean of the calls
// within Tukey's fences), the plain mean for results recorded before it.
func latencyOf(s backend.Stats) float64 {
	if s.EstimateMs > 0 {
		return s.EstimateMs
	}
	return s.MeanMs
}
func higher(a, b float64) bool { return a > b }
func lower(a, b float64) bool  { return a < b }
