package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
)

const blobPrefix = "blobs/sha256/"

// VerifyBlobs re-hashes every blob in the store and returns one problem
// per blob whose bytes do not hash to its key (or cannot be read): what a
// write cut short, a retry over a partial object or bit rot leaves.
func VerifyBlobs(ctx context.Context, s artifacts.Store) ([]string, error) {
	keys, err := s.List(ctx, blobPrefix)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, k := range keys {
		want := strings.TrimPrefix(k, blobPrefix)
		rc, err := s.Get(ctx, k)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if got := hex.EncodeToString(h.Sum(nil)); err != nil || got != want {
			bad = append(bad, fmt.Sprintf("%s: %d bytes hash to %s (read error: %v)", k, n, got, err))
		}
	}
	return bad, nil
}

// sha256Hex finds digests in a manifest, however it spells them
// ("sha256:<hex>", a bare hex field, a blob key).
var sha256Hex = regexp.MustCompile(`[0-9a-f]{64}`)

// Orphans returns the blobs no manifest references. A manifest is any
// JSON document in the store outside blobs/: run.json (the bundle's
// files), every result.json (a graph's and each attempt's: engines, logs),
// state.json, the result index and latest.json. A blob that none of them
// names is unreachable: nothing will ever fetch, reuse or delete it by
// name. Blobs are written before the manifest that names them, so an
// orphan means a writer stopped between the two and its work was not
// redone with the same bytes.
func Orphans(ctx context.Context, s artifacts.Store) ([]string, error) {
	keys, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	referenced := map[string]bool{}
	var blobs []string
	for _, k := range keys {
		if h, ok := strings.CutPrefix(k, blobPrefix); ok {
			blobs = append(blobs, h)
			continue
		}
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		b, err := artifacts.ReadObject(ctx, s, k, 64<<20)
		if err != nil {
			return nil, fmt.Errorf("reading manifest %s: %w", k, err)
		}
		for _, h := range sha256Hex.FindAll(b, -1) {
			referenced[string(h)] = true
		}
	}
	var orphans []string
	for _, h := range blobs {
		if !referenced[h] {
			orphans = append(orphans, blobPrefix+h)
		}
	}
	slices.Sort(orphans)
	return orphans, nil
}
