// Package deployverify owns the layouts `producer fetch` lays a run out
// in (the tunefleet layout, a Triton model repository, an AITune
// checkpoint) as far as signing goes: Files is every file of a layout by
// its path there, deterministic from the state, which finalize signs per
// layout (provenance.SignLayout); CheckLayout and Dir check a directory
// with nothing else at hand: the layout's signed attestation in the
// directory (tunefleet.intoto.jsonl), a verify key, and the files
// themselves. Every file must be a subject by its path there with its
// digest (two files swapped fail), every subject present. A directory of
// a run signed before layouts were is checked against the run's own
// Statement instead: the state and the engines by their digests, the
// files a layout generates (Triton's config.pbtxt and graphs.json) by
// their bytes, regenerated from the signed state.
//
// It is what `producer verify DIR --key K` runs, on a deploy machine
// after the copy, or in a container's entrypoint before it serves. It
// reads no store and imports neither jobs nor internal/cli.
package deployverify
