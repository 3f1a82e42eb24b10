// Package backend defines what every engine technology implements and what
// the rest of tunefleet knows about tuning one graph spec with it: the
// Backend and Engine interfaces, candidates parsed from strings such as
// "ort:cpu:extended:threads=1" or "trt:fp16", results with a failure class,
// the correctness check of an engine's outputs against the recorded
// reference outputs, and benchmark statistics with their stop rules.
//
// It must not import the implementations (ort, trt); they import it.
package backend
