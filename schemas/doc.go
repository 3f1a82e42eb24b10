// Package schemas publishes the JSON Schemas (draft 2020-12) of every
// document tunefleet reads or writes, and validates documents against them.
//
// The schema files in this directory are the contract: bundle.json and its
// aitune block (what a recorder writes), result.json, state.json,
// latest.json, history entries and a nightly's summary.json (what the
// fleet writes). They are plain standard schemas with
// $ids, so any validator can use them (the Python recorder's tests do); Go
// embeds them and validates with santhosh-tekuri/jsonschema. What a schema
// cannot say (cross-references between fields, a declaration against its
// ONNX file) stays with the Go validators of the owning packages.
//
// Validate turns the validator's error tree into the project's problem
// lines: one per mistake, each starting with the JSON path of the value
// (graphs[0].inputs[1].dtype, aitune.graphs["0"].inputs[1].path[0]) and
// saying what is wanted. A pattern's or an anyOf's "description" says what
// is wanted in its message, so descriptions are written to read after
// "want".
//
// The schemas avoid propertyNames: santhosh-tekuri/jsonschema v6.0.3 gives
// its errors an instance location that later validation overwrites (the
// slice is shared), so the path in the message would be wrong.
package schemas
