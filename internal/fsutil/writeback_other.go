//go:build !linux

package fsutil

import "os"

// StartWriteback does nothing where sync_file_range is missing: the fsync
// before the rename writes the whole file.
func StartWriteback(f *os.File, off, n int64) {}
