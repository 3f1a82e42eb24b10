package bundle

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// Identity is what a bundle directory is, by content, before it is
// validated: its model, its graph specs and its digest (Digest's).
type Identity struct {
	Model  string
	Graphs int
	Digest string
}

// Identify computes the identity of the bundle in dir without validating
// it: bundle.json decoded (not checked against its schema), each graph's
// ONNX file walked for its external data, and every file the bundle
// references hashed (through the digest cache), its paths resolved as Open
// resolves them. A valid bundle's digest is the one Open's bundle gives
// (TestIdentifyIsOpensDigest).
//
// It is for a caller that acts only when the digest is one it knows was
// validated: a nightly whose entry's work id, from this digest, names a
// run done before carries that run forward, and opens (validates) only
// the bundles with work. The same digest is the same bytes of every file,
// bundle.json included, which were validated when that work was
// submitted. Anything it cannot read is an error, for Open to explain.
func Identify(dir string) (Identity, error) {
	if fi, err := os.Stat(filepath.Join(dir, ManifestName)); err != nil {
		return Identity{}, err
	} else if fi.Size() > MaxManifestBytes {
		return Identity{}, fmt.Errorf("%s is %d bytes, more than the limit", ManifestName, fi.Size())
	}
	raw, err := fsutil.ReadRegular(filepath.Join(dir, ManifestName))
	if err != nil {
		return Identity{}, err
	}
	m, err := decodeManifest(raw)
	if err != nil {
		return Identity{}, err
	}
	if len(m.Graphs) == 0 || len(m.Graphs) > MaxGraphs {
		return Identity{}, fmt.Errorf("%s: %d graphs", ManifestName, len(m.Graphs))
	}
	b := &Bundle{Dir: dir, Manifest: m, IO: map[string]GraphIO{}, res: newResolver(dir)}
	for i := range b.Manifest.Graphs {
		gp := &b.Manifest.Graphs[i]
		p, err := b.resolve(gp.ONNX)
		if err != nil {
			return Identity{}, err
		}
		io, err := ReadGraphIO(p)
		if err != nil {
			return Identity{}, err
		}
		ext, probs := resolveExternal(b, gp.ONNX, io.ExternalData)
		if len(probs) > 0 {
			return Identity{}, fmt.Errorf("%s", probs[0])
		}
		gp.ExternalData = ext // as Open derives it
	}
	files, err := b.Files()
	if err != nil {
		return Identity{}, err
	}
	return Identity{Model: m.Model, Graphs: len(m.Graphs), Digest: DigestOf(files)}, nil
}
