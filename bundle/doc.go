// Package bundle reads, validates, digests and writes recording bundles, the
// input of every tuning run: a directory with bundle.json at its root, and
// per graph spec an ONNX graph plus recorded samples in the ONNX test-data
// layout (input_<k>.pb / output_<k>.pb, serialized TensorProtos; the outputs
// are the original model's reference outputs).
//
// A bundle that Open returns has been validated whole: every path resolves
// inside the bundle, declared dtypes and ranks agree with the ONNX graph,
// and every sample decodes and fits its declared shapes. Writer stages a new
// bundle beside its destination and renames it into place only once it
// validates, so a failed import leaves nothing behind.
//
// A long-lived process opens the same bundles again (a scheduled nightly,
// every night): Memo returns a bundle validated before while none of its
// files changed, and file digests are remembered the same way (a file's
// identity: device, inode, size, modification and change times); a process
// that runs once a night keeps those digests in a file from one run to the
// next (LoadDigests, SaveDigests). Identify gives a bundle directory's digest without validating it, for a
// caller that validates only bundles whose digest it does not know.
package bundle
