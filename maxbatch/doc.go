// Package maxbatch is AITune's find-max-batch-size step of ahead-of-time
// tuning (FindMaxBatchSizeMixin): before any candidate is built, a neutral
// engine is measured over batch sizes 2^n until its throughput saturates
// (ThroughputSaturatedProfilingStopStrategy, the rule backend.SweepState
// follows), the batch size of the highest throughput is taken, and the
// graph's declared max batch is extended to it, never narrowed
// (GraphSpec.update_max_batch_size). The TensorRT profiles, the batch sweep
// and the AITune checkpoint then carry the extended range, as AITune's own
// tune gives them.
//
// AITune's neutral engine is TorchEager; tunefleet has no torch on a
// worker, and its closest equivalent is ONNX Runtime with every graph
// optimization disabled (NeutralCandidate). The step is off by default:
// it costs a sweep per task, and a bundle's reference outputs cover only
// the recorded range.
package maxbatch
