package artifacts

import (
	"context"
	"os"
)

// downloadHashed writes the object at key into f and returns the sha256
// and the size of what it wrote: at most one byte past size, enough to
// tell an oversized object without downloading all of it. It is one GET,
// hashed as it is written (hashedCopy). With writeback (the file will be
// fsynced before it is renamed into place: Fetch), writing the file to
// disk starts as the download goes, piece by piece, so that the fsync
// waits for the last piece only. Blobs (fetchFile) and a checkpoint's
// other objects (fetchKey) both come this way.
func downloadHashed(ctx context.Context, s Store, key string, size int64, f *os.File, writeback bool) (string, int64, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	return hashedCopy(ctx, rc, f, size+1, writeback)
}
