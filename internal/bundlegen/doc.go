// Package bundlegen makes bundles from things users already have: an ONNX
// file plus shape ranges (random inputs from a fixed seed, reference outputs
// from ONNX Runtime with every graph optimization off), or a model folder in
// the ONNX model-zoo / node-test layout (model.onnx + test_data_set_*/).
package bundlegen
