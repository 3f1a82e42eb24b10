// Package realmodels is the real-models test tier: pre-trained ONNX models
// that npm packages ship (voice activity detection with a sample-rate
// scalar and recurrent state, OCR detection, recognition and orientation,
// a wake-word classifier), pinned in models.tsv by package version and the
// sha256 of the tarball and of the .onnx file, fetched by `make models`.
// Each goes through `producer bundle from-onnx` and `worker tune` with real
// ONNX Runtime, and must get a correct winner measured at the batch sizes
// its inputs allow. What these models needed of the tools (batch axes not
// at 0, scalar inputs, dim names) was fixed in the tools, never in the
// models.
//
// The tests skip when the models are not fetched, and fail when CI is set.
package realmodels
