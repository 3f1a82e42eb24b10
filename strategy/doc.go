// Package strategy decides which candidate backend wins a graph spec. It is
// pure selection logic over backend.CandidateResult values — no I/O, no
// clocks — so the tuner that builds, checks and benchmarks candidates asks
// a Strategy three questions: what to benchmark for a candidate that passed
// the correctness check (Plan), whether any further candidate needs to be
// built (Done), and which one wins (Select).
//
// The five strategies follow NVIDIA AITune's (aitune/torch/tune_strategy):
//
//   - first-wins: candidates are tried in order and the first that builds
//     and passes the correctness check wins; later ones are not built.
//   - one-backend: exactly one candidate; its build or correctness failure
//     is the graph's failure, with its class.
//   - max-throughput: every candidate is built and swept over the graph's
//     batch sizes; the highest throughput (samples/s) wins.
//   - min-latency: every candidate is measured at batch size 1 only; the
//     lowest mean latency wins.
//   - latency-budget: like max-throughput, but only batch sizes whose mean
//     latency is within the budget count, and the sweep stops past it.
//
// A profiling strategy's winner must beat the runner-up beyond noise
// (noise.CompareCosts over the rounds of the two measurements: the lower
// bound of the ratio above 1 + noise.MinGain). Otherwise the selection is
// a tie (Decision "tie") and the first in candidate order among the
// candidates within noise of the fastest wins (TieBreak "candidate_order"):
// AITune's rule for exact ties (strict comparisons, the earlier candidate
// wins), extended to ties within noise, so that re-running a bundle picks
// the same winner however the noise falls.
//
// Differences from AITune, all because tunefleet runs exported ONNX graphs
// on a fleet rather than a live torch.nn.Module:
//
//   - There is no TorchEager baseline. AITune profiles the eager module and
//     (a) rejects first-wins/one-backend candidates that are not at least
//     1 % faster than it (PerformanceValidationMixin) and (b) falls back to
//     the eager module when no profiling candidate beats it. tunefleet has
//     no eager module to run, so there is no performance-validation gate
//     and no baseline fallback: a candidate that passes the correctness
//     check qualifies on its own, and when none qualifies the graph fails
//     with a *backend.Failure (AITune's "no valid backend" RuntimeError).
//   - There is no max-batch-size discovery: the batch sizes to sweep come
//     from the bundle's declared shape ranges, not from profiling the eager
//     module.
//   - The correctness check compares outputs numerically with the recorded
//     reference outputs (backend.Check); AITune only checks for NaN/Inf and
//     output shapes.
//   - Benchmarks of first-wins and one-backend winners are still planned,
//     for the record (AITune measures them for its performance gate); a
//     candidate whose benchmark fails still qualifies (Plan.ForTheRecord),
//     as AITune accepts one whose profiling fails.
//
// Failures when nothing qualifies carry a class the queue can act on:
// infrastructure (retry) if any candidate failed in a way a retry may fix
// (backend.FailureClass.Retryable), otherwise a deterministic class.
package strategy
