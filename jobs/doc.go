// Package jobs is the queue pipeline: asynq task types and payloads, the
// submission of a bundle as a run (blobs to the store, the run record to
// Redis, one tune:graph task per graph spec), the worker's handlers, the
// reconciler's repairs, and the fan-in that finalizes a run exactly once
// into a module state (state.json) and moves
// models/<model>/<platform>/latest.json when the run succeeded. Embedded
// mode (StartEmbedded) runs a worker in the producer's process.
//
// It builds on two rooms of its own: runstate, the run bookkeeping in
// Redis (every Redis operation on runs, attempts, locks, cancel, restore,
// the registry; the Lua scripts), and resultindex, the result index and
// the negative cache in the store. jobs reads the store and asynq; it
// never touches a run's Redis keys but through runstate.
//
// Delivery is at least once (asynq re-runs a task whose worker died), so
// every handler is idempotent: blobs are content-addressed, manifests are
// written last, the graph bookkeeping is a Redis SREM that counts only once
// (runstate.Runs.CompleteGraph), and finalize checks the run's status
// before doing anything.
//
// Work is incremental twice over: a graph whose work key has a result on
// the worker's platform (the result index) is reused, and a candidate that
// failed deterministically on that work key, platform and toolchain (the
// negative cache) is not built again unless the run was submitted with
// RetryFailed.
//
// It must not import metrics, web or anything under internal/testkit (an
// Observer is how metrics see it); an import-graph test
// (internal/testkit/importgraph) keeps it so.
package jobs
