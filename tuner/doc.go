// Package tuner tunes one graph spec of a bundle: for each candidate in
// order (until the strategy says it has seen enough) it builds an engine,
// runs every recorded sample through it and checks the outputs against the
// reference outputs, benchmarks it over the strategy's batch sizes, and then
// lets the strategy pick the winner. It writes the engines and a versioned
// result.json into an output directory.
//
// It is the unit of work that `worker tune` runs locally and that a queue
// worker runs per task; it knows nothing about queues or object stores.
package tuner
