// Package ort is the ONNX Runtime backend: it builds an engine for a graph
// spec by creating an onnxruntime_go session with the candidate's options
// (optimization level, intra-op threads, spinning off), saves the optimized
// model as the engine artifact, runs recorded samples with outputs
// pre-allocated from the reference outputs, and benchmarks the session.
//
// A crash inside ONNX Runtime (a segfault in a kernel, an abort on a bad
// model) must not take the worker down, so every session lives in a child
// process: the backend starts the current executable again with ChildEnv
// set, and talks to it over its stdin and stdout. Programs that use this
// backend call MaybeServeChild first thing in main (and in TestMain), which
// turns such a child into the session server and never returns.
//
// Candidates are "ort:cpu:<level>[:threads=N][:inter=N][:spin=on]" with
// level one of disabled, basic, extended, all (ONNX Runtime's graph
// optimization levels).
//
// At "all", ONNX Runtime rewrites convolutions into its NCHWc layout
// (domain com.microsoft.nchwc), padded to the channel block of this CPU;
// Build reads the optimized model it wrote and records such operators and
// the block in the engine's info (InfoHardwareOps, InfoNCHWcBlock), from
// which finalize writes the graph's requires.
package ort
