// Package hostile holds the hostile-inputs table test: bundles that lie
// (archive tricks, manifest lies, ONNX lies, sample lies, fleet-scale
// sizes), each run through `producer bundle validate`, embedded `producer
// submit` and `worker tune`, and each refused with one clear line before
// anything is stored, or accepted by a documented policy. It has no
// non-test code.
package hostile
