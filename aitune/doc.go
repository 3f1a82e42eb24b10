// Package aitune writes AITune-native checkpoints from Go: the module state
// that ait.load (AITune ≥ 0.6, the ArtifactPath checkpoint format) loads
// back into PyTorch, so a Python service needs nothing but AITune and the
// fleet's engines to run what the fleet tuned.
//
// AITune's saved state is not JSON but torch.save of a Python object graph
// (reference/aitune.md §3): {"": <Module dict>} whose TunedModule holds, per
// graph, the SampleMetadata.to_dict() key (with nested pickles) and a
// TensorRTBackend or ONNXRuntimeBackend dict that points at its engine
// through ArtifactPaths. Write builds that graph with package pickle, wraps
// it with package torchzip, and lays the engines out as AITune's
// LocalTorchStorage does (numbered backend folders, optional .ait archive
// and SHA-256 sums).
//
// Most of what the state needs comes from the bundle's graph declarations
// (tensor names, dtypes, labelled shapes, bounds). The rest only the
// recorder knows — the forward signature, where each ONNX tensor sits in
// the call's arguments and in the output object, non-tensor arguments —
// and travels in the bundle's "aitune" block (SCHEMA.md), which ParseBlock
// validates when a bundle is submitted: its structure against the published
// schema (schemas/aitune-block.schema.json), the rest against the bundle.
//
// The validator is split by concern: parse.go (the block, graphs, the
// forward signature), parse_locators.go (tensor locators, paths,
// multipliers, non-tensor arguments), skeleton.go (the output skeleton),
// dynshapes.go (explicit dynamic shapes); block.go holds the types.
//
// What cannot be produced outside Python (reference §3.8) is refused with a
// message: custom output classes, backends other than TensorRT and ONNX
// Runtime, non-primitive argument values.
package aitune
