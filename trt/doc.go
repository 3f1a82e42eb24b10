// Package trt is the TensorRT backend: it drives NVIDIA's trtexec as a
// subprocess, never through cgo, so a worker without TensorRT still builds
// and a crash inside TensorRT cannot take the worker down.
//
// The package is split along what trtexec actually is:
//
//   - version.go detects the TensorRT version and build from trtexec's
//     banner; everything else is decided per version, because trtexec's
//     flags changed incompatibly between 8.6, 10.x and 11 (an unknown flag
//     makes it fail).
//   - candidate.go parses candidates such as "trt:fp16:opt=5:workspace=4096"
//     into a Config and says whether a version can express it.
//   - command.go turns a Config and a request into trtexec arguments: one
//     "--name=value" argv element per option, no shell, with the shape-name
//     rules and the --memPoolSize unit trap of trtexec's option parser.
//   - runner.go runs trtexec in its own process group with both output
//     streams in one log file, and kills the whole group on timeout or
//     cancellation.
//   - parse.go reads a trtexec log (version, device, build milestones, the
//     performance summary, warnings, the &&&& result line) and never panics;
//     classify.go turns a log and an exit status into a failure class:
//     permanent, retryable, or "this worker is broken".
//   - exports.go reads the JSON files of --exportTimes, --exportOutput,
//     --exportProfile and --exportLayerInfo, tolerating the nan/inf that
//     trtexec's hand-written JSON can contain.
//   - backend.go implements backend.Backend on top of all of it, with
//     timing caches shared per platform through an optional store hook;
//     engine.go is the built engine: every Run and Benchmark is one
//     trtexec process on the saved plan, with real inputs (--loadInputs)
//     and exported outputs and timings read back.
//   - report.go renders what the parser and classifier make of a log, for
//     `worker trt-log`.
//
// A Backend runs trtexec with one environment (Options.Env), so a worker
// with several GPUs makes one Backend per GPU, each pinned with
// CUDA_VISIBLE_DEVICES, sharing one TimingCache.
//
// Every rule here is taken from real trtexec output (the logs and exports
// in shared/fixtures/trtexec, which the tests read where they are) or, for
// the one format no public sample of was found (--exportOutput), from
// trtexec's source as shared/reference/trtexec-nvml.md quotes it.
package trt
