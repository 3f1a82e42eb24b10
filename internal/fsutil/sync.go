package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// SyncTree flushes every regular file and directory under dir (dir too) to
// stable storage. Called on a staging directory before it is renamed into
// place: after a crash the destination then holds the old state or the
// whole new one, never renamed files whose data was not written.
func SyncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		return syncPath(p)
	})
}

// SyncDir flushes a directory, so that a rename into it is durable. Best
// effort: some file systems cannot sync a directory.
func SyncDir(dir string) {
	syncPath(dir)
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
