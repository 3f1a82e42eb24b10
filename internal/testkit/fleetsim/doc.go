// Package fleetsim simulates a fleet's night on the real code (issue 35,
// `make bench-fleet`): real redis-server (one, or a Cluster of three
// masters), a real store (a local directory, or versitygw behind a proxy
// that counts requests), the real `producer nightly` as a process, and
// hundreds of simulated workers, the real `worker run` as processes of
// this test binary with several task slots each, whose engine builds the
// replay backend (backend/replay, TUNEFLEET_REPLAY) stands in for:
// a graph's build time drawn from a distribution and slept compressed by
// a factor K, a real engine file uploaded, the real correctness check.
//
// Fleets are generated cheaply: one Identity graph, its reference output
// recorded by ONNX Runtime, merged into a bundle of G graphs whose files
// every model's bundle hard-links, with graph names unique in the fleet
// (so each graph has its own work key and nothing is reused).
//
// Run measures one night and returns its rows (measured, target, met):
// the coordinator's CPU per graph (the producer, Redis and the store's
// processes, from /proc and INFO), Redis commands and memory per graph,
// store requests per graph, enqueue → start latency, finalize throughput,
// the nightly's planning and submission, the web UI's pages and `producer
// runs` over the night's history, and the makespan against its lower bound
// (the simulated work over the slots). Compare sets the per-graph rows of
// nights of different sizes side by side. A wall-clock row whose machine
// was loaded, or whose night kept the cores busy, says `undecided`
// (internal/testkit/verdict) rather than yes or no.
//
// Tests only: nothing outside internal/testkit imports it.
package fleetsim
