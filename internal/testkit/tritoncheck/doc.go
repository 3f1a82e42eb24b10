// Package tritoncheck checks Triton model configurations the way Triton
// itself reads them, for tests: it compiles Triton's own
// model_config.proto (../shared/oracles/triton, unmodified) at test time
// with protocompile, parses a config.pbtxt strictly with prototext into
// inference.ModelConfig (an unknown field or a wrong type fails), and
// applies the rules Triton core's model-config validation
// (src/model_config_utils.cc: ValidateModelConfig, ValidateIOShape,
// ValidateInstanceGroup) and its ONNX Runtime and TensorRT backends apply
// when they load a model. It ships nothing and imports nothing of
// tunefleet's.
package tritoncheck
