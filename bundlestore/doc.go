// Package bundlestore keeps recording bundles in the artifact store, so
// that a fleet file can name a bundle by its store key and a nightly's pod
// (a Kubernetes CronJob) needs no shared volume to read it.
//
// A pushed bundle is its files as content-addressed blobs (the blobs a
// submission uploads anyway, so a later submit moves nothing) and an index
// object listing them with their digests:
//
//	bundles/<model>/sha256-<hex>.json   the bundle of that digest (write-once)
//	bundles/<model>/latest.json         the one pushed last (overwritten)
//
// A fleet entry's bundle: names either ("bundles/<model>" means latest),
// as store:KEY or as s3://BUCKET[/PREFIX]/KEY of the fleet's own store (a
// plain relative path stays a path: "bundles/x" may be a directory).
// Fetch downloads every file verified against its digest and opens the
// bundle with full validation: the index comes from shared storage.
// ReadIndex reads only the index (refused when its digest is not its
// files'), and Index.GraphCount its graphs (the stored bundle.json of an
// index pushed before the count was recorded): a nightly learns a
// stored bundle's work id from them and fetches only bundles with work to
// do.
//
// It owns the bundles/ keys and imports artifacts and bundle; it must not
// import jobs, fleet or the CLI.
package bundlestore
