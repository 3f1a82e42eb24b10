package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// FileDigest is a bundle file with its sha256.
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Files lists every file the bundle references (bundle.json, each graph's
// ONNX file and every sample file) with its digest, sorted by path.
func (b *Bundle) Files() ([]FileDigest, error) {
	rels := map[string]bool{ManifestName: true}
	for _, g := range b.Manifest.Graphs {
		for _, r := range g.Paths() {
			rels[r] = true
		}
	}
	return b.digestFiles(rels)
}

// GraphFiles lists the files one graph spec depends on (its ONNX file and
// its samples), with digests.
func (b *Bundle) GraphFiles(graph string) ([]FileDigest, error) {
	g, ok := b.Manifest.Graph(graph)
	if !ok {
		return nil, fmt.Errorf("bundle %s has no graph %q", b.Dir, graph)
	}
	rels := map[string]bool{}
	for _, r := range g.Paths() {
		rels[r] = true
	}
	return b.digestFiles(rels)
}

// Paths lists the bundle-relative files a graph spec depends on: its ONNX
// file, the ONNX file's external data (as Open derived it), and every
// sample file, cleaned.
func (g Graph) Paths() []string {
	out := []string{clean(g.ONNX)}
	for _, e := range g.ExternalData {
		out = append(out, clean(e))
	}
	for _, s := range g.Samples {
		for k := range g.Inputs {
			out = append(out, clean(fmt.Sprintf("%s/input_%d.pb", s, k)))
		}
		for k := range g.Outputs {
			out = append(out, clean(fmt.Sprintf("%s/output_%d.pb", s, k)))
		}
	}
	return out
}

func clean(rel string) string { return filepath.ToSlash(filepath.Clean(filepath.FromSlash(rel))) }

// cleanSorted cleans and sorts a list of bundle-relative paths.
func cleanSorted(rels []string) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = clean(r)
	}
	sort.Strings(out)
	return out
}

func (b *Bundle) digestFiles(rels map[string]bool) ([]FileDigest, error) {
	out := make([]FileDigest, 0, len(rels))
	for r := range rels {
		p, err := b.resolve(r)
		if err != nil {
			return nil, err
		}
		if f, ok := b.verified[r]; ok {
			// Verified just before Open (OpenVerified): trusted while the
			// file keeps its size, instead of reading gigabytes again.
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == f.Size {
				out = append(out, FileDigest{Path: r, SHA256: f.SHA256, Size: f.Size})
				continue
			}
		}
		sum, size, err := sha256FileCached(p)
		if err != nil {
			return nil, err
		}
		out = append(out, FileDigest{Path: r, SHA256: sum, Size: size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Digest is the bundle's content digest, "sha256:<hex>": a hash over the
// sorted list of its files' paths and digests, so it changes whenever any
// byte the bundle references changes, and not when unreferenced files do.
func (b *Bundle) Digest() (string, error) {
	files, err := b.Files()
	if err != nil {
		return "", err
	}
	return DigestOf(files), nil
}

// DigestOf hashes a sorted file list.
func DigestOf(files []FileDigest) string {
	var sb strings.Builder
	for _, f := range files {
		fmt.Fprintf(&sb, "%s\x00%s\n", f.Path, f.SHA256)
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SHA256File streams a file through sha256 and returns its hex digest and
// size.
func SHA256File(path string) (string, int64, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
