package strategy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/noise"
)

// The strategy names, as given on the command line and recorded in results.
const (
	FirstWins     = "first-wins"
	OneBackend    = "one-backend"
	MaxThroughput = "max-throughput"
	MinLatency    = "min-latency"
	LatencyBudget = "latency-budget"
)

// Metric names of a Selection.
const (
	MetricThroughput = "throughput" // samples per second
	MetricLatencyMs  = "latency_ms" // mean latency of one call, in ms
)

// Strategy chooses the winner of one graph spec among its candidates.
// Implementations are immutable values, safe for concurrent use.
type Strategy interface {
	// Name is one of Names().
	Name() string
	// LatencyBudgetMs is the budget of latency-budget, 0 for the others.
	// With Name it is the strategy's whole configuration (what a work key
	// and a result record need).
	LatencyBudgetMs() float64
	// CheckCandidates rejects a candidate list the strategy cannot work
	// with, before anything is built.
	CheckCandidates(cs []backend.Candidate) error
	// Plan says what to benchmark for a candidate that passed the
	// correctness check, given the graph's batch sizes (empty when the
	// graph has no batch axis).
	Plan(batchSizes []int) Plan
	// Done reports whether no further candidate needs to be built, given
	// the results so far in candidate order.
	Done(results []backend.CandidateResult) bool
	// Select picks the winner among results in candidate order. When none
	// qualifies the error is a *backend.Failure whose class tells the queue
	// whether a retry may help.
	Select(results []backend.CandidateResult) (Selection, error)
}

// Plan is what to benchmark for one candidate.
type Plan struct {
	// BatchSizes to measure, in order. Empty means: run the recorded
	// sample as is, labelled batch size 1 (AITune's batching=False).
	BatchSizes []int `json:"batch_sizes,omitempty"`
	// Sweep stops the batch-size sweep early (saturation, latency budget).
	Sweep backend.SweepRule `json:"sweep"`
	// ForTheRecord marks measurements the strategy does not select by
	// (first-wins, one-backend): a candidate whose benchmark fails still
	// qualifies, as AITune accepts a candidate whose profiling fails.
	ForTheRecord bool `json:"for_the_record,omitempty"`
}

// Selection is the winner of a graph spec and why it won.
type Selection struct {
	Index     int     `json:"index"`     // position of the winner in the results
	Candidate string  `json:"candidate"` // the winner's candidate string
	Metric    string  `json:"metric,omitempty"`
	Value     float64 `json:"value,omitempty"`
	BatchSize int     `json:"batch_size,omitempty"` // the batch size Value was measured at
	Reason    string  `json:"reason"`               // one short sentence for tables
	// Decision says how a profiling strategy decided: beyond_noise (the
	// winner beat every other candidate beyond noise), tie (it did not:
	// TieBreak picked among Tied), or alone (nothing to compare with).
	// Empty for first-wins and one-backend, which do not select by speed.
	Decision string `json:"decision,omitempty"`
	// RunnerUp is the candidate the winner is compared with: the next
	// fastest (beyond_noise), or in a tie the fastest other of the tied.
	// Margin is how much better the winner is than it (ratio of the
	// metric, > 1 better), with its interval and the rounds it rests on.
	RunnerUp string       `json:"runner_up,omitempty"`
	Margin   *noise.Ratio `json:"margin,omitempty"`
	// Tied are the candidates within noise of the fastest (winner
	// included), in candidate order; TieBreak the rule that picked.
	Tied     []string `json:"tied,omitempty"`
	TieBreak string   `json:"tie_break,omitempty"`
	// Identical are the tied candidates whose engine is the winner's
	// (byte-identical, measured once): they tie by construction, not by
	// measurement, so no ratio is given for them. When every other tied
	// candidate is one, RunnerUp and Margin are empty.
	Identical []string `json:"identical,omitempty"`
	// Speedup is the winner's over the baseline candidate, measured in the
	// same rounds (SpeedupOver); nil when either was not measured.
	Speedup *Speedup `json:"speedup,omitempty"`

	// notFastest says that the tie-break picked a candidate other than
	// the fastest, so the reason must not call its figure the highest
	// (lowest); runnerUpValue is the runner-up's figure, for the reason.
	// Neither is recorded: the reason says them.
	notFastest    bool
	runnerUpValue float64
}

// Decisions of a profiling strategy's Selection.
const (
	DecisionBeyondNoise = "beyond_noise"
	DecisionTie         = "tie"
	DecisionAlone       = "alone"
)

// TieBreakOrder is the tie-break: among candidates within noise of each
// other, the first in candidate order wins (AITune's rule for exact ties,
// extended to ties within noise), whatever the noise did to their figures.
const TieBreakOrder = "candidate_order"

// IsTie reports whether the selection was a tie.
func (s *Selection) IsTie() bool { return s != nil && s.Decision == DecisionTie }

// Within reports whether a candidate was tied with the winner (so a
// change of winner to it is no change beyond noise).
func (s *Selection) Within(candidate string) bool {
	return s != nil && (s.Candidate == candidate || slices.Contains(s.Tied, candidate))
}

// Headline is a winner's headline measurement: the one at the batch size
// sel names, else its best throughput (ok false when nothing was
// measured). It is the one rule every table, page and history entry uses
// for a winner's figure.
func Headline(sel *Selection, benchmarks []backend.Stats) (backend.Stats, bool) {
	cr := backend.CandidateResult{Benchmarks: benchmarks}
	if sel != nil && sel.BatchSize > 0 {
		if st, ok := cr.AtBatch(sel.BatchSize); ok {
			return st, true
		}
	}
	return cr.BestThroughput(0)
}

// best is the word a reason puts before the winner's figure: "highest"
// (or "lowest") only when it is the best figure measured; a tie-break
// may pick another, and then the figure is given bare.
func (s Selection) best(word string) string {
	if s.notFastest {
		return ""
	}
	return word + " "
}

// final is the selection with its reason, without what only the reason
// needed.
func (s Selection) final(reason string) Selection {
	s.Reason, s.notFastest, s.runnerUpValue = reason, false, 0
	return s
}

// figure is a value of the selection's metric for text.
func (s Selection) figure(v float64) string {
	if s.Metric == MetricLatencyMs {
		return backend.Human(v) + " ms"
	}
	return backend.Human(v) + " samples/s"
}

// decisionText is what a Reason adds about the decision. It names the
// runner-up with its figure when the runner-up is the fastest, says that
// identical engines were measured once (with no ratio: they share one
// measurement), and gives the tie-break's rule as it is.
func (s Selection) decisionText() string {
	m := s.Margin
	switch {
	case s.Decision == DecisionBeyondNoise && m != nil:
		return fmt.Sprintf("; %s× the runner-up %s (%s–%s, %d rounds)", RatioFigure(m.Value), s.RunnerUp, RatioFigure(m.Lo), RatioFigure(m.Hi), m.Rounds)
	case s.Decision != DecisionTie:
		return ""
	}
	out := ""
	if m != nil {
		// An interval that excludes 1 but not 1 + the minimum gain is a
		// real difference too small to matter: say which tie it is.
		kind := "within noise"
		if m.Lo > 1 || m.Hi < 1 {
			kind = fmt.Sprintf("under the %g %% minimum gain", noise.MinGain*100)
		}
		other := s.RunnerUp
		if s.notFastest {
			other = fmt.Sprintf("the fastest, %s at %s", s.RunnerUp, s.figure(s.runnerUpValue))
		}
		out = fmt.Sprintf("; a tie %s with %s (%s×, %s–%s, %d rounds)", kind, other,
			RatioFigure(m.Value), RatioFigure(m.Lo), RatioFigure(m.Hi), m.Rounds)
	}
	if len(s.Identical) > 0 {
		out += "; identical engines (one measured): " + strings.Join(s.Identical, ", ")
	}
	return out + fmt.Sprintf(": the first listed of %d tied wins", len(s.Tied))
}

// RatioFigure is a ratio's figure for text, three decimals ("1.020"),
// "∞" for an unbounded or undefined one: every ratio a reason, a table or
// a comparison prints reads alike.
func RatioFigure(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "∞"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Names lists the strategies in the order documentation presents them.
func Names() []string {
	return []string{FirstWins, OneBackend, MaxThroughput, MinLatency, LatencyBudget}
}

// Parse returns the named strategy. latencyBudgetMs is the budget of
// latency-budget (required, > 0) and must be 0 for every other strategy,
// so that a budget given by mistake is reported rather than ignored.
func Parse(name string, latencyBudgetMs float64) (Strategy, error) {
	if name != LatencyBudget && latencyBudgetMs != 0 {
		return nil, fmt.Errorf("a latency budget (%g ms) applies only to strategy %s, not %q", latencyBudgetMs, LatencyBudget, name)
	}
	switch name {
	case FirstWins:
		return firstWins{}, nil
	case OneBackend:
		return oneBackend{}, nil
	case MaxThroughput:
		return maxThroughput{}, nil
	case MinLatency:
		return minLatency{}, nil
	case LatencyBudget:
		if !(latencyBudgetMs > 0) || math.IsInf(latencyBudgetMs, 1) {
			return nil, fmt.Errorf("strategy %s needs a latency budget in ms greater than 0 (got %g)", LatencyBudget, latencyBudgetMs)
		}
		return latencyBudget{budgetMs: latencyBudgetMs}, nil
	}
	return nil, fmt.Errorf("unknown strategy %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// atLeastOne is CheckCandidates of every strategy but one-backend.
func atLeastOne(name string, cs []backend.Candidate) error {
	if len(cs) == 0 {
		return fmt.Errorf("strategy %s needs at least one candidate", name)
	}
	return nil
}

// sweepPlan measures every batch size with AITune's saturation rule.
func sweepPlan(batchSizes []int) Plan {
	return Plan{BatchSizes: clone(batchSizes), Sweep: backend.DefaultSweepRule()}
}

// clone copies a slice so a Plan never aliases its caller's memory; empty
// stays nil.
func clone(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return append([]int(nil), s...)
}

// errNoResults is returned by Select when there is nothing to select from:
// a bug in the caller (CheckCandidates guarantees at least one candidate),
// not a failure of any candidate.
var errNoResults = errors.New("strategy: no candidate results to select from")

// noWinner builds the failure of a graph spec where no candidate qualified.
// The class tells the queue what to do: infrastructure (retry) if any
// candidate failed in a way a retry may fix, since that candidate might
// then pass and win; otherwise class when given (the caller knows why
// nothing qualified); otherwise the class of the last failure, the last
// thing that went wrong; otherwise (nothing failed, yet nothing qualified)
// runtime. note says why a passed candidate did not win.
func noWinner(headline string, results []backend.CandidateResult, class backend.FailureClass, note func(backend.CandidateResult) string) *backend.Failure {
	last := backend.FailureClass("")
	retryable := false
	var lines []string
	for _, r := range results {
		switch r.Status {
		case backend.StatusFailed:
			fc, msg := describeFailure(r)
			last = fc
			retryable = retryable || fc.Retryable()
			lines = append(lines, fmt.Sprintf("%s: %s", r.Candidate, msg))
		case backend.StatusPassed:
			lines = append(lines, fmt.Sprintf("%s: passed, but %s", r.Candidate, note(r)))
		default:
			lines = append(lines, fmt.Sprintf("%s: %s", r.Candidate, orUnknown(string(r.Status))))
		}
	}
	switch {
	case retryable:
		class = backend.FailInfrastructure
	case class != "":
	case last != "":
		class = last
	default:
		class = backend.FailRuntime
	}
	msg := headline
	if len(lines) > 0 {
		msg += ": " + strings.Join(lines, "; ")
	}
	return backend.Fail(class, "select", errors.New(msg))
}

// unmeasured is the note of a passed candidate that a profiling strategy
// skipped because it has no usable benchmark.
func unmeasured(backend.CandidateResult) string { return "nothing was measured" }

// failureOf returns a failed result's class and message. A failed result
// without a recorded failure is treated as a runtime failure: something
// ran and went wrong deterministically as far as anyone can tell.
func failureOf(r backend.CandidateResult) (backend.FailureClass, string) {
	if r.Failure == nil {
		return backend.FailRuntime, "failed without a recorded reason"
	}
	c := r.Failure.Class
	if c == "" {
		c = backend.FailRuntime
	}
	return c, r.Failure.Message
}

// asFailure turns a recorded failure back into a *backend.Failure with the
// same class and op, naming the candidate.
func asFailure(r backend.CandidateResult) *backend.Failure {
	class, op, msg := splitFailure(r)
	return backend.Fail(class, op, fmt.Errorf("candidate %s: %s", r.Candidate, msg))
}

// describeFailure renders a recorded failure the way backend.Failure does
// ("<op> failed (<class>): <message>"), always with its class in it.
func describeFailure(r backend.CandidateResult) (backend.FailureClass, string) {
	class, op, msg := splitFailure(r)
	if op == "" {
		return class, fmt.Sprintf("%s failure: %s", class, msg)
	}
	return class, fmt.Sprintf("%s failed (%s): %s", op, class, msg)
}

// splitFailure returns a failed result's class, op and bare message.
// FailureInfo.Message is usually the original error's Error(), which
// already starts with "<op> failed (<class>): "; that prefix is dropped so
// that what is rebuilt from it does not say it twice.
func splitFailure(r backend.CandidateResult) (backend.FailureClass, string, string) {
	class, msg := failureOf(r)
	op := ""
	if r.Failure != nil {
		op = r.Failure.Op
	}
	return class, op, strings.TrimPrefix(msg, backend.Fail(class, op, errors.New("")).Error())
}

func orUnknown(s string) string {
	if s == "" {
		return "no status"
	}
	return s
}

// bestThroughput is a result's best measured throughput within a latency
// budget (0: none). A benchmark with zero throughput measured nothing and
// does not count.
func bestThroughput(r backend.CandidateResult, budgetMs float64) (backend.Stats, bool) {
	st, ok := r.BestThroughput(budgetMs)
	return st, ok && st.Throughput > 0
}

// recordThroughput fills a selection's metric with the winner's best
// throughput, for the record, when it was measured.
func recordThroughput(sel *Selection, r backend.CandidateResult) {
	if st, ok := bestThroughput(r, 0); ok {
		sel.Metric, sel.Value, sel.BatchSize = MetricThroughput, st.Throughput, st.BatchSize
	}
}
