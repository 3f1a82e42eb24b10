// Package onnxtest writes small, deterministic ONNX models from Go (no
// Python): the fixture models of tests, benchmarks and the demo. Weights come
// from a fixed-seed generator so the same call always writes the same bytes.
package onnxtest
