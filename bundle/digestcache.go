package bundle

import (
	"os"
	"sync"
	"time"
)

// The digests of unchanged files are remembered for the life of the
// process: a scheduled nightly (`producer nightly --schedule`, one
// long-lived process) would otherwise re-hash every file of every bundle
// of the fleet each night, gigabytes for TensorRT-sized models, to learn
// that nothing changed.
//
// A file is taken as unchanged while its identity (device, inode, size,
// modification and status-change times in nanoseconds) is the same, as
// git's index does; the change time cannot be set back by a user, so a
// rewrite that restores the modification time still shows. Linux stamps
// files from a coarse clock (a jiffy, a few milliseconds), so a file
// rewritten within one tick of being hashed could keep its identity: a
// digest is remembered only when the file's last change is older than
// settleTime, and only when the file did not change while it was hashed.

// settleTime is how old a file's last change must be for its digest to be
// remembered.
var settleTime = 2 * time.Second

// maxRemembered bounds the cache; past it, it starts again empty.
const maxRemembered = 1 << 17

var remembered digestMemory

// digestMemory is the digests remembered, by file identity.
type digestMemory struct {
	sync.Mutex
	m map[fileID]string
	// lastUsed is when each entry was last looked up or added (Unix
	// seconds; from the cache file for one this process has not used):
	// SaveDigests keeps the entries used within keepUnused. touched counts
	// the lookups and additions since the last save.
	lastUsed map[fileID]int64
	touched  int
}

// keepUnused is how long a digest no run used stays in the cache file: a
// file changed or gone is not looked up again, and a night that stopped
// early (bad input) must not cost the rest their digests.
const keepUnused = 7 * 24 * time.Hour

// use marks id as used now; the caller holds the lock.
func (d *digestMemory) use(id fileID) {
	if d.lastUsed == nil {
		d.lastUsed = map[fileID]int64{}
	}
	d.lastUsed[id] = time.Now().Unix()
	d.touched++
}

// sha256FileCached is SHA256File through the cache of unchanged files.
func sha256FileCached(path string) (string, int64, error) {
	before, ok := identify(path)
	if ok {
		remembered.Lock()
		sum, hit := remembered.m[before]
		if hit {
			remembered.use(before)
		}
		remembered.Unlock()
		if hit {
			return sum, before.size, nil
		}
	}
	sum, size, err := SHA256File(path)
	if err != nil || !ok || time.Since(time.Unix(0, before.ctime)) < settleTime {
		return sum, size, err
	}
	if after, ok := identify(path); ok && after == before && size == before.size {
		remembered.Lock()
		if remembered.m == nil || len(remembered.m) >= maxRemembered {
			remembered.m, remembered.lastUsed = map[fileID]string{}, nil
		}
		remembered.m[before] = sum
		remembered.use(before)
		remembered.Unlock()
	}
	return sum, size, nil
}

// fileID is what says a file's bytes have not been written since.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// identify is the file's identity, or false where the system gives none
// (then nothing is remembered).
func identify(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileID{}, false
	}
	return statID(fi)
}
