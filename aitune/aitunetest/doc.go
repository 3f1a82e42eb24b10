// Package aitunetest holds the golden checkpoint cases shared by package
// aitune's tests and the generator command internal/testkit/tools/mkgolden: a
// 2-graph TensorRT module and a 1-graph ONNX Runtime module, each a bundle
// manifest, an aitune block and tiny fake engines. Tests write each case
// and compare the result byte for byte with aitune/testdata/golden/<case>.
package aitunetest
