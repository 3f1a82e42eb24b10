package strategy

import (
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/backend"
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
	best.Reason = fmt.Sprintf("highest throughput %.1f samples/s at batch %d", best.Value, best.BatchSize)
	return best, nil
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
	best, _, found := pick(results, MetricLatencyMs, smallestBatch, meanMsOf, lower)
	if !found {
		return Selection{}, noWinner("no correct backend found", results, "", unmeasured)
	}
	best.Reason = fmt.Sprintf("lowest mean latency %.4g ms at batch %d", best.Value, best.BatchSize)
	return best, nil
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
		best.Reason = fmt.Sprintf("highest throughput %.1f samples/s at batch %d within the %g ms budget (mean %.4g ms)",
			st.Throughput, st.BatchSize, s.budgetMs, st.MeanMs)
	}
	if found {
		return best, nil
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

// pick returns the passed, measured result whose score is best, with the
// benchmark it was scored on. better is strict, so ties go to the earlier
// candidate, as in AITune's _is_better.
func pick(results []backend.CandidateResult, metric string, measure func(backend.CandidateResult) (backend.Stats, bool),
	score func(backend.Stats) float64, better func(a, b float64) bool) (Selection, backend.Stats, bool) {
	var (
		best  Selection
		bestS backend.Stats
		found bool
	)
	for i, r := range results {
		if !r.Passed() {
			continue
		}
		st, ok := measure(r)
		if !ok {
			continue // passed but unmeasured: nothing to compare
		}
		if v := score(st); !found || better(v, best.Value) {
			best = Selection{Index: i, Candidate: r.Candidate, Metric: metric, Value: v, BatchSize: st.BatchSize}
			bestS, found = st, true
		}
	}
	return best, bestS, found
}

func throughputOf(s backend.Stats) float64 { return s.Throughput }
func meanMsOf(s backend.Stats) float64     { return s.MeanMs }
func higher(a, b float64) bool             { return a > b }
func lower(a, b float64) bool              { return a < b }
