// Package faults is the fault suite: the queue pipeline run as a user runs
// it (redis-server, versitygw, `worker run` processes, the producer's
// commands, real ONNX Runtime; internal/testkit/stack), with one fault injected per
// scenario while a run is in flight: a worker SIGKILLed mid-build or
// mid-upload or on every attempt, redis-server restarted with and without
// persistence, versitygw killed or frozen mid-transfer, latency and
// connection resets from a TCP fault proxy between the workers and their
// services, a local store that fills up, an ONNX Runtime session child
// that crashes.
//
// Every scenario asserts the same things about its run once the fault is
// over:
//
//   - a final state: `producer status RUN -o json` says done or failed
//     (never running, never "no such run");
//   - finalize ran exactly once (finalizations == 1 in Redis's record);
//   - latest.json names this run when it is done, and is unchanged when it
//     failed;
//   - every blob in the store re-hashes to its key;
//   - no orphans: every blob is named by some JSON manifest in the store
//     (run.json, a graph's or an attempt's result.json, state.json, the
//     result index, latest.json); see stack.Orphans;
//   - the messages a user sees: the line a worker or command printed about
//     the fault.
//
// Each scenario has a server of each kind of its own and runs in parallel
// with the others (they mostly wait: for a server to come back, for asynq's
// lease recovery), so the suite's wall time is about its longest
// scenario's. One scenario (TestWorkerKilledMidUpload) waits for a dead
// worker's real lease to expire (about 65 s); the others age the lease
// (stack.ExpireLeases) so that the next worker recovers the task as it
// starts. No assertion is on wall-clock time: waits
// are generous and say what they waited for. The suite prints a table of
// its scenarios (scenario, injection, assertions, wall time) when it ends;
// docs/reliability.md's "Fault suite" section holds a copy.
package faults
