// Package artifacts owns everything tunefleet keeps in object storage: the
// [Store] interface with an S3 implementation (minio-go, any S3-compatible
// server) and a local-directory implementation, the bucket layout (the
// ...Key functions), and helpers that move blobs and JSON manifests in and
// out of a store. The documents it fetches (state.json, latest.json) are
// package state's types; their JSON Schemas are in schemas/.
//
// # Stores
//
// [Open] turns a store URL into a checked [Store]:
//
//	/var/lib/tunefleet, file:///abs/dir, file://relative/dir   a local directory ([Local])
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1   S3 ([S3])
//
// Both implementations are also io.Closers ([Local] holds its directory
// open). S3 credentials never come from the URL or from flags: they come
// from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or
// S3_ACCESS_KEY / S3_SECRET_KEY as CI sets them) or from an AWS shared
// credentials file, so that they never show up in process listings, logs or
// messages.
//
// Keys are slash-separated and checked by [CheckKey] in every
// implementation, so a key that works on a local directory works on S3 and
// the reverse, and no key can climb out of a local store's root. One
// limitation is shared by [Local] and by S3 servers that map keys to files
// (versitygw's posix backend): a key cannot be both an object and a
// "directory" of other keys ("a/b" and "a/b/c"). The layout never does that.
//
// # Writes are atomic and idempotent
//
// A reader sees the old object, the new one, or none, never a part: [Local]
// writes a temporary file beside the target and renames it into place, and
// S3 only makes an object visible when its PUT (or multipart upload)
// completes. A writer that fails midway (its reader errors, the context is
// cancelled, the process dies) leaves the previous object, or nothing.
//
// Blobs are content-addressed ([BlobKey], [Ref]): [PutFile] and [PutBytes]
// write a blob under its sha256, so a retried task writes the same bytes to
// the same key. A large blob already there is re-hashed, and the upload is
// skipped only when its bytes match (a rotted one is overwritten); a small
// one is simply written again. Manifests are written last ([PutJSON]) and
// point only at blobs that exist.
//
// # Downloads are verified
//
// Nothing downloaded is trusted without its checksum: [FetchFile] hashes the
// stream while writing it to a temporary file and only renames it into place
// when the sha256 and the size match the [Ref]; a corrupt or truncated blob
// is an error naming the key and both digests, and leaves no file behind.
//
// The contract every Store implementation must pass is the suite in
// artifacts/storetest.
package artifacts
