package bundle

import (
	"path/filepath"
	"sync"
	"time"
)

// Memo remembers the bundles it opened, for a process that opens the same
// bundles again and again: a scheduled nightly (`producer nightly
// --schedule`, one process for months) opens every bundle of the fleet
// each night, and reading and validating a bundle (its manifest against
// the schema, every sample decoded, its ONNX files walked) was most of an
// unchanged night's time. A bundle none of whose files changed since it
// was validated is not read again.
//
// A file is taken as unchanged while its identity is the same, as the
// digest cache takes it (device, inode, size, modification and change
// times): bundle.json and every file the bundle references (Graph.Paths).
// A bundle is remembered only when every such file last changed settleTime
// before its opening began, so that no write during or just before the
// opening (within the clock's coarse tick) can keep an identity the
// validated bytes do not have. Its symbolic links are resolved anew each
// time (a remembered bundle gets a resolver of its own).
//
// The zero Memo is ready to use; a nil *Memo opens every time.
type Memo struct {
	mu sync.Mutex
	m  map[string]memoEntry
}

// maxMemoBundles bounds a Memo; past it, it starts again empty.
const maxMemoBundles = 1 << 16

type memoEntry struct {
	b   *Bundle
	ids map[string]fileID // bundle-relative path → identity when validated
}

// Open is Open(dir), or the bundle opened from dir before when none of
// its files changed since. The bundle returned is the caller's to read,
// not to change (remembered ones share their manifest).
func (c *Memo) Open(dir string) (*Bundle, error) {
	if c == nil {
		return Open(dir)
	}
	key, err := filepath.Abs(dir)
	if err != nil {
		return Open(dir)
	}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && sameFiles(dir, e.ids) {
		b := *e.b
		b.Dir, b.res = dir, newResolver(dir)
		return &b, nil
	}
	began := time.Now()
	b, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if ids, ok := settledFiles(b, began); ok {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxMemoBundles {
			c.m = map[string]memoEntry{}
		}
		c.m[key] = memoEntry{b: b, ids: ids}
		c.mu.Unlock()
	}
	return b, nil
}

// settledFiles are the identities of b's files, when every one of them
// last changed settleTime before began.
func settledFiles(b *Bundle, began time.Time) (map[string]fileID, bool) {
	ids := map[string]fileID{}
	rels := []string{ManifestName}
	for _, g := range b.Manifest.Graphs {
		rels = append(rels, g.Paths()...)
	}
	for _, rel := range rels {
		id, ok := identify(filepath.Join(b.Dir, filepath.FromSlash(rel)))
		if !ok || began.Sub(time.Unix(0, id.ctime)) < settleTime {
			return nil, false
		}
		ids[rel] = id
	}
	return ids, true
}

// sameFiles reports whether every file keeps its identity.
func sameFiles(dir string, ids map[string]fileID) bool {
	for rel, want := range ids {
		if got, ok := identify(filepath.Join(dir, filepath.FromSlash(rel))); !ok || got != want {
			return false
		}
	}
	return true
}
