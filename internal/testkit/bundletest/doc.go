// Package bundletest writes small, valid bundles for tests: real ONNX graphs
// from onnxtest, samples of deterministic float32 values, and reference
// outputs that are deterministic tensors of the right shape (not the model's
// real outputs: no runtime is needed to write them). Tests that need a
// broken bundle write a valid one and break it on disk, e.g. with
// EditManifest.
package bundletest
