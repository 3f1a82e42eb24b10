// Package resultindex is what makes work incremental: the result index
// (results/<platform>/<work key>.json: the result a graph's work gave on
// a platform, which a worker reuses instead of tuning and the producer
// reads to skip work before enqueuing it), the checks that make reuse
// safe (VerifyResultBlobs re-hashes a reused result's engine,
// VerifyStateBlobs checks a state's engines and checkpoint before
// latest.json moves to it; a damaged entry is dropped, never trusted), and
// the negative cache beside the index (a candidate that failed
// deterministically on a work key, platform and toolchain is not built
// again until a run asks for it with RetryFailed).
//
// Everything here is in the store, and blobs are named by their SHA-256,
// so a check is a digest or a size. An index entry is the newest
// measurement of its work: a result is reused only when it was measured
// with the stop rule the run asks for (Measured: the bench time and
// warm-up, which the work key leaves out), and a run that measures again
// (other settings, or --remeasure) overwrites the entry with its own; a
// negative cache entry depends only on its key (a retry writes an equal
// one).
//
// It must not talk to Redis (runstate does) or import jobs (the queue
// calls it, from the worker's handler, submit and finalize), asynq,
// metrics, web or anything under internal/testkit. An import-graph test
// (internal/testkit/importgraph) keeps it so.
package resultindex
