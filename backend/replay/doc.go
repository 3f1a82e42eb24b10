// Package replay is a simulation tool, never a way to tune: a backend
// that the real worker uses instead of ONNX Runtime or TensorRT when the
// environment variable TUNEFLEET_REPLAY is set, so that a fleet of
// hundreds of workers can run on one machine (internal/testkit/fleetsim,
// `make bench-fleet`). Everything around the engine is the real code:
// the queue, the worker's downloads and uploads, the correctness check,
// the measurement, the result index, finalize and history.
//
// What it replays is a graph's tuning time. Build draws the time a
// graph's build would take from a distribution (lognormal, or fixed) or
// from a history file, deterministically from the seed, the model, the
// graph and the candidate, and sleeps it divided by the compression
// factor (scale=K: K simulated seconds per second). It then writes a real
// engine file (a small JSON record of what it replayed: the graph's ONNX
// digest, the simulated and the slept time) and a build log, which the
// worker uploads as any engine.
//
// The engine computes the identity: each output is the input of the same
// position. The correctness check runs on it as on any engine, so it
// passes exactly on graphs that compute the identity (the simulator's
// graphs are one Identity node) and fails on any other, as a wrong
// engine would. Benchmark measures calls that sleep a per-call latency
// (latency=, per sample of the batch; not compressed) with the real
// stop rule (backend.Measure): its statistics are real measurements of
// the replay engine, and say nothing about any hardware.
//
// It imports only backend and bundle; `worker run` (internal/cli) parses
// TUNEFLEET_REPLAY (Parse; a bad spec is refused before anything is
// opened), wraps the registered backends with it (Wrap) and says so in its
// log.
package replay
