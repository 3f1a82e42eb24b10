// Package jobs is the queue pipeline: asynq task types and payloads, the
// submission of a bundle as a run (blobs to the store, the run record to
// Redis, one tune:graph task per graph spec), the worker's handlers, run
// bookkeeping in Redis with go-redis, and the fan-in that finalizes a run
// exactly once into a module state (state.json) and moves
// models/<model>/<platform>/latest.json when the run succeeded.
//
// Delivery is at least once (asynq re-runs a task whose worker died), so
// every handler is idempotent: blobs are content-addressed, manifests are
// written last, the graph bookkeeping is a Redis SREM that counts only once,
// and finalize checks the run's status before doing anything.
//
// Work is incremental twice over: a graph whose work key has a result on
// the worker's platform (the result index) is reused, and a candidate that
// failed deterministically on that work key, platform and toolchain (the
// negative cache, negcache.go) is not built again unless the run was
// submitted with RetryFailed.
package jobs
