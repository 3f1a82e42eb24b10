package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to begin writing n bytes of f from off to
// disk now, without waiting (sync_file_range SYNC_FILE_RANGE_WRITE). A
// download that will be fsynced before it is renamed into place calls it
// as each piece lands, so that the fsync at the end waits for the last
// pieces only instead of flushing the whole file after the transfer: the
// write to disk overlaps the download rather than following it. Best
// effort: an error only means the fsync does the work.
func StartWriteback(f *os.File, off, n int64) {
	if n > 0 {
		_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}
}
