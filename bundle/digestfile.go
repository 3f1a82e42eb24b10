package bundle

// The digest cache kept in a file, for a producer that runs once a night
// (cron, a CI job): without it each run hashed every file of every bundle
// again, weights and all, to learn that nothing changed; with it an
// unchanged file costs a stat, as in a long-lived producer. What is kept is
// what the process remembered (files whose identity held while they were
// hashed and whose last change had settled), by identity only: a file
// whose identity changed is hashed again, as in memory.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// DigestCacheFormat is the version of a digest cache file.
const DigestCacheFormat = "tunefleet.digest-cache/v1"

// maxDigestCacheFile bounds the file LoadDigests reads (maxRemembered
// entries of about 130 bytes, and room).
const maxDigestCacheFile = 64 << 20

type digestCacheFile struct {
	Format string        `json:"format"`
	Files  []digestEntry `json:"files"`
}

type digestEntry struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime_ns"`
	Ctime  int64  `json:"ctime_ns"`
	SHA256 string `json:"sha256"`
	// Used is when a run last looked the digest up (Unix seconds).
	Used int64 `json:"used"`
}

// LoadDigests adds the digests kept in the file at path to those this
// process remembers, and returns how many it read. A missing file is no
// error (nothing is kept yet). A file that is not a digest cache is an
// error naming it; nothing of it is used.
func LoadDigests(path string) (int, error) {
	fh, err := fsutil.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the digest cache %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxDigestCacheFile+1))
	fh.Close()
	if err != nil {
		return 0, fmt.Errorf("read the digest cache %s: %w", path, err)
	}
	if len(data) > maxDigestCacheFile {
		return 0, fmt.Errorf("the digest cache %s is larger than %d MiB: remove it (the next run writes it again)", path, maxDigestCacheFile>>20)
	}
	var f digestCacheFile
	if err := json.Unmarshal(data, &f); err != nil || f.Format != DigestCacheFormat {
		return 0, fmt.Errorf("the digest cache %s is not a %s file: remove it (the next run writes it again)", path, DigestCacheFormat)
	}
	for _, e := range f.Files {
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != 32 || e.Size < 0 {
			return 0, fmt.Errorf("the digest cache %s has a bad entry (sha256 %.80q): remove it (the next run writes it again)", path, e.SHA256)
		}
	}
	remembered.Lock()
	defer remembered.Unlock()
	if remembered.m == nil || len(remembered.m)+len(f.Files) > maxRemembered {
		remembered.m, remembered.lastUsed = map[fileID]string{}, nil
	}
	if remembered.lastUsed == nil {
		remembered.lastUsed = map[fileID]int64{}
	}
	n := 0
	for _, e := range f.Files {
		if n == maxRemembered {
			break
		}
		id := fileID{dev: e.Dev, ino: e.Ino, size: e.Size, mtime: e.Mtime, ctime: e.Ctime}
		remembered.m[id] = e.SHA256
		if e.Used > remembered.lastUsed[id] {
			remembered.lastUsed[id] = e.Used
		}
		n++
	}
	return n, nil
}

// SaveDigests writes the digests this process remembers and a run used
// within the last week (keepUnused: the others are of files that changed
// or went) to the file at path, replacing it whole (a temporary file
// renamed: a reader sees the old file or the new one), its directory made
// if missing, and lets go of the others. Nothing is written when no digest
// was used or computed since the last save (a night that stopped before
// it read a bundle leaves the file as it was); wrote says whether it was.
func SaveDigests(path string) (wrote bool, err error) {
	since := time.Now().Add(-keepUnused).Unix()
	remembered.Lock()
	if remembered.touched == 0 {
		remembered.Unlock()
		return false, nil
	}
	f := digestCacheFile{Format: DigestCacheFormat, Files: []digestEntry{}}
	for id, sum := range remembered.m {
		if used := remembered.lastUsed[id]; used >= since {
			f.Files = append(f.Files, digestEntry{Dev: id.dev, Ino: id.ino, Size: id.size, Mtime: id.mtime, Ctime: id.ctime, SHA256: sum, Used: used})
		}
	}
	touched := remembered.touched
	remembered.Unlock()
	data, err := json.Marshal(&f)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("write the digest cache %s: %w", path, err)
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return false, fmt.Errorf("write the digest cache %s: %w", path, err)
	}
	// Memory now says what the file says: the digests left out are let
	// go here too.
	remembered.Lock()
	for id := range remembered.m {
		if remembered.lastUsed[id] < since {
			delete(remembered.m, id)
			delete(remembered.lastUsed, id)
		}
	}
	remembered.touched -= touched
	remembered.Unlock()
	return true, nil
}

// ForgetDigests lets go of every digest this process remembers: what a
// new process starts with (a benchmark or test measuring a one-shot
// producer inside a long-lived process calls it first).
func ForgetDigests() {
	remembered.Lock()
	remembered.m, remembered.lastUsed, remembered.touched = nil, nil, 0
	remembered.Unlock()
}
