// Package triton owns the Triton Inference Server model repository that
// `producer fetch --format triton` lays out from a run's module state:
// one Triton model per graph spec, its engine as 1/model.plan (TensorRT)
// or 1/model.onnx (ONNX Runtime), and a config.pbtxt in the text format of
// Triton's model_config.proto (inference.ModelConfig), written from what
// the run measured: the batch axis, the shapes, the winner's provider,
// optimization level and threads, its TensorRT optimization profile and
// the batch sizes its sweep found best, and what the engine requires of
// the machine (state.Requires; the parameter tunefleet.requires). graphs.json at the repository's
// root maps each graph spec (AITune's name for it) to its Triton model.
//
// The config is checked in tests against Triton's own schema
// (../shared/oracles/triton/model_config.proto, compiled at test time)
// and against the rules Triton core applies when it loads a model.
//
// It reads a fetched folder (package artifacts lays it out and calls
// Layout before the folder appears); it must not import jobs or
// internal/cli, and talks to no store.
package triton
