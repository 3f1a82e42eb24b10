package bundlestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// Format is the index object's format.
const Format = "tunefleet.stored-bundle/v1"

// Prefix is where stored bundles live in the store.
const Prefix = "bundles/"

// ErrBadRef is wrapped by the error of a reference that names no stored
// bundle of this store: the user's to fix.
var ErrBadRef = errors.New("bad stored-bundle reference")

// Index is what a pushed bundle's index object holds.
type Index struct {
	Format string              `json:"format"`
	Model  string              `json:"model"`
	Digest string              `json:"digest"` // bundle.Bundle.Digest
	Files  []bundle.FileDigest `json:"files"`
	// Graphs is how many graph specs the bundle has (GraphCount); 0 in
	// indexes pushed before it was recorded.
	Graphs int `json:"graphs,omitempty"`
}

// IndexKey is the write-once index of the bundle of model with digest
// ("sha256:<hex>").
func IndexKey(model, digest string) string {
	return Prefix + model + "/sha256-" + strings.TrimPrefix(digest, "sha256:") + ".json"
}

// LatestKey is the index of the bundle of model pushed last.
func LatestKey(model string) string { return Prefix + model + "/latest.json" }

// StoreScheme marks a fleet entry's bundle: as a key of the fleet's store.
const StoreScheme = "store:"

// IsRef reports whether a fleet entry's bundle: names a stored bundle
// rather than a path: s3://… or store:KEY.
func IsRef(s string) bool {
	return strings.HasPrefix(s, "s3://") || strings.HasPrefix(s, StoreScheme)
}

// Push stores the bundle's files as blobs (those already stored are not
// sent again) and then its index, under IndexKey and LatestKey, in that
// order: an index is never visible before its files. It returns the
// write-once index key.
func Push(ctx context.Context, s artifacts.Store, b *bundle.Bundle) (string, error) {
	files, err := b.Files()
	if err != nil {
		return "", fmt.Errorf("digest the bundle: %w", err)
	}
	blobs := make([]artifacts.FileBlob, len(files))
	for i, f := range files {
		blobs[i] = artifacts.FileBlob{Path: filepath.Join(b.Dir, filepath.FromSlash(f.Path)), Ref: artifacts.Ref{SHA256: f.SHA256, Size: f.Size}}
	}
	if err := artifacts.PutFiles(ctx, s, blobs, 0); err != nil {
		return "", err
	}
	idx := Index{Format: Format, Model: b.Manifest.Model, Digest: bundle.DigestOf(files), Files: files, Graphs: len(b.Manifest.Graphs)}
	key := IndexKey(idx.Model, idx.Digest)
	if err := artifacts.CheckKey(key); err != nil {
		return "", err
	}
	if _, err := artifacts.PutNewJSON(ctx, s, key, idx); err != nil {
		return "", fmt.Errorf("write %s: %w", key, err)
	}
	if err := artifacts.PutJSON(ctx, s, LatestKey(idx.Model), idx); err != nil {
		return "", fmt.Errorf("write %s: %w", LatestKey(idx.Model), err)
	}
	return key, nil
}

// Key resolves a reference to the key of an index object in the store
// whose URL is storeURL: store:bundles/<model> (its latest),
// store:bundles/<model>/<name>.json, or either key behind
// s3://BUCKET[/PREFIX]/ of that same store.
func Key(ref, storeURL string) (string, error) {
	key, isKey := strings.CutPrefix(ref, StoreScheme)
	if !isKey {
		if !strings.HasPrefix(ref, "s3://") {
			return "", fmt.Errorf("%w: %q: want store:KEY or s3://BUCKET/KEY", ErrBadRef, ref)
		}
		base, err := storeBase(storeURL)
		if err != nil {
			return "", err
		}
		rest, ok := strings.CutPrefix(ref, base)
		if !ok {
			return "", fmt.Errorf("%w: %q is not in the store %s: push the bundle to the fleet's store (producer bundle push)", ErrBadRef, ref, base)
		}
		key = rest
	}
	if !strings.HasPrefix(key, Prefix) || artifacts.CheckKey(key) != nil {
		return "", fmt.Errorf("%w: %q: want store:bundles/MODEL or store: and the key producer bundle push printed", ErrBadRef, ref)
	}
	if !strings.HasSuffix(key, ".json") {
		key = LatestKey(strings.TrimPrefix(key, Prefix))
	}
	return key, nil
}

// storeBase is "s3://BUCKET/[PREFIX/]" of an S3 store URL.
func storeBase(storeURL string) (string, error) {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", fmt.Errorf("%w: an s3:// bundle needs an s3:// store, not %q", ErrBadRef, strings.SplitN(storeURL, "?", 2)[0])
	}
	base := "s3://" + u.Host + "/"
	if p := strings.Trim(u.Path, "/"); p != "" {
		base += p + "/"
	}
	return base, nil
}

// Fetch downloads the bundle an index key names into dir (created; it
// must not exist or be empty), every file verified against its digest,
// and opens it with full validation. The bundle's digest must be the
// index's.
func Fetch(ctx context.Context, s artifacts.Store, key, dir string) (*bundle.Bundle, error) {
	idx, err := ReadIndex(ctx, s, key)
	if err != nil {
		return nil, err
	}
	for _, f := range idx.Files {
		rel := filepath.FromSlash(f.Path)
		if !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("%s: file %q leaves the bundle", key, f.Path)
		}
		if err := artifacts.FetchFile(ctx, s, artifacts.Ref{SHA256: f.SHA256, Size: f.Size}, filepath.Join(dir, rel)); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	b, err := bundle.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if d, err := b.Digest(); err != nil || d != idx.Digest {
		return nil, fmt.Errorf("%s: the fetched bundle's digest is %s, its index says %s", key, d, idx.Digest)
	}
	return b, nil
}

// ReadIndex reads the index object at key: what bundle it names (its
// model, digest and files), without fetching the bundle. An index whose
// digest is not its files' is refused.
func ReadIndex(ctx context.Context, s artifacts.Store, key string) (Index, error) {
	var idx Index
	if err := artifacts.GetJSON(ctx, s, key, &idx); err != nil {
		if errors.Is(err, artifacts.ErrNotExist) {
			return Index{}, fmt.Errorf("%w: no stored bundle at %s (push it with producer bundle push)", ErrBadRef, key)
		}
		return Index{}, err
	}
	if idx.Format != Format {
		return Index{}, fmt.Errorf("%s: format %q, want %s", key, idx.Format, Format)
	}
	if d := bundle.DigestOf(idx.Files); d != idx.Digest {
		return Index{}, fmt.Errorf("%s: its files' digest is %s, the index says %s (push the bundle again)", key, d, idx.Digest)
	}
	return idx, nil
}

// GraphCount is how many graph specs the indexed bundle has: the index's
// Graphs, or, in an index pushed before it was recorded, read from its
// stored bundle.json (one small object; the bundle's other files are not
// read), of which only the count and the model, which must be the
// index's, are decoded. A bundle whose work is known was validated in
// full when that work was submitted; one that is not is fetched and
// validated.
func (idx Index) GraphCount(ctx context.Context, s artifacts.Store) (int, error) {
	if idx.Graphs > 0 {
		return idx.Graphs, nil
	}
	i := slices.IndexFunc(idx.Files, func(f bundle.FileDigest) bool { return f.Path == bundle.ManifestName })
	if i < 0 {
		return 0, fmt.Errorf("stored bundle %s of %s lists no %s", idx.Digest, idx.Model, bundle.ManifestName)
	}
	raw, err := artifacts.ReadObject(ctx, s, artifacts.BlobKey(idx.Files[i].SHA256), bundle.MaxManifestBytes)
	if err != nil {
		return 0, fmt.Errorf("read the %s of stored bundle %s of %s: %w", bundle.ManifestName, idx.Digest, idx.Model, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != idx.Files[i].SHA256 {
		return 0, fmt.Errorf("the %s of stored bundle %s of %s: the stored blob is not what the index names", bundle.ManifestName, idx.Digest, idx.Model)
	}
	var m struct {
		Model  string            `json:"model"`
		Graphs []json.RawMessage `json:"graphs"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, fmt.Errorf("the %s of stored bundle %s of %s: %w", bundle.ManifestName, idx.Digest, idx.Model, err)
	}
	if m.Model != idx.Model {
		return 0, fmt.Errorf("the %s of stored bundle %s is model %q, its index says %q", bundle.ManifestName, idx.Digest, m.Model, idx.Model)
	}
	return len(m.Graphs), nil
}

// TempPrefix starts the name of FetchTemp's directories in os.TempDir(),
// followed by the fetching process's pid: RemoveOrphans removes those of
// processes that are gone.
const TempPrefix = "tunefleet-bundle-"

// RemoveOrphans removes the bundles that processes no longer running
// fetched into os.TempDir() (FetchTemp) and did not get to remove: a
// nightly killed half-way leaves every bundle it had fetched. It returns
// how many it removed.
func RemoveOrphans() (int, error) { return fsutil.RemoveOrphans("", TempPrefix) }

// FetchTemp is Fetch into a new temporary directory, removed by cleanup.
func FetchTemp(ctx context.Context, s artifacts.Store, key string) (*bundle.Bundle, func(), error) {
	dir, err := fsutil.MkdirTempOwned("", TempPrefix)
	if err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	b, err := Fetch(ctx, s, key, dir)
	if err != nil {
		cleanup()
		return nil, func() {}, err
	}
	return b, cleanup, nil
}
