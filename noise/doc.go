// Package noise owns tunefleet's one noise rule: how timed calls become an
// estimate that a few hiccups cannot carry, and when one measurement beats
// another beyond noise.
//
//   - Outliers are calls outside Tukey's fences (1.5 interquartile ranges
//     beyond the quartiles, as criterion.rs reports them); they are counted
//     and reported, and dropped from the estimate.
//   - The estimate of a set of calls is the mean of the calls within the
//     fences (a trimmed mean): a 0.2 ms stall among 3 µs calls moves it by
//     nothing.
//   - Two measurements are compared on their rounds: a measurement is taken
//     in rounds that alternate between candidates, and each round has its
//     own estimate. The ratio of two measurements is estimated on the log
//     scale from the round estimates (paired round by round when they were
//     interleaved, Welch's unequal-variance interval otherwise), with a
//     Student-t interval at Level confidence. One beats the other only when
//     the whole interval lies beyond 1 + the minimum gain; otherwise it is a
//     tie.
//
// The package is pure arithmetic: it imports nothing of tunefleet, so the
// strategies, the history's comparison of nights and every display use the
// same rule.
package noise
