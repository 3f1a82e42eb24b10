package strategy

import (
	"fmt"

	"github.com/tunefleet/tunefleet/backend"
)

// firstWins is AITune's FirstWinsStrategy without its performance gate:
// the first candidate that builds and passes the correctness check wins.
type firstWins struct{}

func (firstWins) Name() string             { return FirstWins }
func (firstWins) LatencyBudgetMs() float64 { return 0 }

func (firstWins) CheckCandidates(cs []backend.Candidate) error { return atLeastOne(FirstWins, cs) }

// Plan sweeps the batch sizes like max-throughput: the numbers do not
// decide anything, but they go in the report and let a later run compare.
func (firstWins) Plan(batchSizes []int) Plan { return recordPlan(batchSizes) }

// Done as soon as one candidate passed: the ones after it are not built.
func (firstWins) Done(results []backend.CandidateResult) bool {
	for _, r := range results {
		if r.Passed() {
			return true
		}
	}
	return false
}

func (firstWins) Select(results []backend.CandidateResult) (Selection, error) {
	if len(results) == 0 {
		return Selection{}, errNoResults
	}
	for i, r := range results {
		if !r.Passed() {
			continue
		}
		sel := Selection{Index: i, Candidate: r.Candidate, Reason: "first candidate to pass"}
		if i > 0 {
			sel.Reason = fmt.Sprintf("first candidate to pass, after %d that did not", i)
		}
		recordThroughput(&sel, r)
		return sel, nil
	}
	return Selection{}, noWinner("no candidate passed", results, "", unmeasured)
}

// oneBackend is AITune's OneBackendStrategy without its performance gate
// and TorchEager fallback: the single candidate wins if it passes, and its
// failure is the graph's failure otherwise.
type oneBackend struct{}

func (oneBackend) Name() string             { return OneBackend }
func (oneBackend) LatencyBudgetMs() float64 { return 0 }

func (oneBackend) CheckCandidates(cs []backend.Candidate) error {
	if len(cs) != 1 {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.String()
		}
		return fmt.Errorf("strategy %s takes exactly one candidate, got %d %v (use %s or a profiling strategy to compare several)",
			OneBackend, len(cs), names, FirstWins)
	}
	return nil
}

func (oneBackend) Plan(batchSizes []int) Plan { return recordPlan(batchSizes) }

// recordPlan sweeps as the profiling strategies do, for the record only.
func recordPlan(batchSizes []int) Plan {
	p := sweepPlan(batchSizes)
	p.ForTheRecord = true
	return p
}

// Done after the only candidate's result, whatever it is.
func (oneBackend) Done(results []backend.CandidateResult) bool { return len(results) > 0 }

func (oneBackend) Select(results []backend.CandidateResult) (Selection, error) {
	switch {
	case len(results) == 0:
		return Selection{}, errNoResults
	case len(results) > 1:
		return Selection{}, fmt.Errorf("strategy %s: %d candidate results, want exactly one", OneBackend, len(results))
	}
	r := results[0]
	switch r.Status {
	case backend.StatusPassed:
		sel := Selection{Index: 0, Candidate: r.Candidate, Reason: "the only candidate, passed"}
		recordThroughput(&sel, r)
		return sel, nil
	case backend.StatusFailed:
		// AITune's OneBackend raises the build or correctness error itself;
		// keeping its class lets the queue retry a timeout but not a bug.
		return Selection{}, asFailure(r)
	}
	return Selection{}, fmt.Errorf("strategy %s: candidate %s was not tried (status %s)", OneBackend, r.Candidate, orUnknown(string(r.Status)))
}
