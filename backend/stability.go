package backend

import (
	"fmt"
	"strings"

	"github.com/tunefleet/tunefleet/noise"
)

// When a figure is unstable: the rule that marks it, the cause it
// records and the advice that fits the cause (docs/measurement.md §3).

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
