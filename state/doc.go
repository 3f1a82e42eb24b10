// Package state holds the documents a finished run leaves for deploy
// tooling: the module state (state.json, tunefleet.state/v1) with its AITune
// checkpoint description, and the pointer to the newest good one
// (latest.json, tunefleet.latest/v1); and the plan of a nightly
// (nightly/<id>/plan.json, tunefleet.nightly/v1), which package fleet writes
// and package report reads. Their JSON Schemas are published in
// schemas/ (state.schema.json, latest.schema.json), kept in step with these
// types by a test there.
//
// A graph's Requires says what a machine needs to run its engine when the
// engine is tied to the hardware that built it (ONNX Runtime's NCHWc
// layout, padded to one CPU's channel block; a TensorRT plan's compute
// capability and release); Requires.CanRun is the one rule deploy tooling
// checks a target against (fetch --for-platform, --for-this-machine).
//
// The types live apart from package artifacts, which stores and fetches
// them: storage needs no knowledge of backends, strategies or shapes, and
// the documents need none of storage.
package state
