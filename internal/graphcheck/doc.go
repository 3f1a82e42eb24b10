// Package graphcheck runs a bundle's graphs on their own recorded samples
// with ONNX Runtime on the CPU and compares the outputs with the recorded
// references, within the bundle's tolerances: the check that a graph can
// reproduce its recording before it reaches the queue (`producer bundle
// check`, and the Python recorder after every export).
//
// It owns the verdicts (per graph, per sample, per output) and the "likely
// cause" a failure is explained with (a size the exporter traced in as a
// constant, a graph that computes something else). It uses the ort backend
// and backend.Check; it must not import jobs, the queue, the store or the
// CLI, so that any caller can check a bundle without a fleet.
package graphcheck
