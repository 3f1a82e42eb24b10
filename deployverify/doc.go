// Package deployverify checks a directory that `producer fetch` laid out
// (the tunefleet layout, a Triton model repository or an AITune
// checkpoint) with nothing else at hand: the run's signed provenance in
// the directory, a verify key, and the files themselves. Every file must
// be accounted for by what was signed, by its path in that layout: the
// state and the engines by their digests (an engine under another graph's
// name fails), the files a layout generates (Triton's config.pbtxt and
// graphs.json) by their bytes, regenerated from the signed state, and no
// file may be there that nothing signed.
//
// It is what `producer verify DIR --key K` runs, on a deploy machine
// after the copy, or in a container's entrypoint before it serves. It
// reads no store and imports neither jobs nor internal/cli.
package deployverify
