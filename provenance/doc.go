// Package provenance owns tunefleet's signed provenance: the in-toto
// Statement (v1) with the SLSA provenance v1 predicate that finalize
// writes per run, its DSSE envelope, the signing and verify keys (ed25519
// or ECDSA P-256, PEM), and the checks deploy tooling runs before it
// trusts an engine or an AITune checkpoint.
//
// The formats come from their own projects' Go code: the Statement and
// the predicate are github.com/in-toto/attestation's types (serialized
// with protojson, as their spec writes them), the envelope and its
// pre-authentication encoding github.com/secure-systems-lab/go-securesystemslib/dsse.
// This package only says what goes in them (the subjects: every engine,
// the state blob, the AITune checkpoint's files; the build definition and
// the run details) and which key signs.
//
// Each layout a run can be fetched in is signed too (SignLayout: one
// envelope naming every file of the layout by its path there, then one
// per file), stored at runs/<run>/layouts/<layout>.intoto.jsonl.
//
// A run's envelopes are stored at runs/<run>/attestation.intoto.jsonl, one
// JSON envelope per line (the in-toto bundle convention); a key id (the
// hex sha256 of the public key's DER SubjectPublicKeyInfo) names the key
// in each signature, so that deploy tooling holding several verify keys
// (rotation) tries the right one.
//
// It must not import jobs, artifacts or internal/cli: the caller reads and
// writes the store, and hands this package the state and its bytes.
package provenance
