package artifacts

import (
	"context"
	"os"
)

// downloadBlob writes the blob ref names into tmp and returns the sha256
// and the size of what it wrote: at most one byte past ref.Size, enough to
// tell an oversized object without downloading all of it. It is one GET,
// hashed as it is written (hashedCopy). With writeback (the file will be
// fsynced before it is renamed into place: Fetch), writing the file to
// disk starts as the download goes, piece by piece, so that the fsync
// waits for the last piece only.
func downloadBlob(ctx context.Context, s Store, ref Ref, tmp *os.File, writeback bool) (string, int64, error) {
	rc, err := s.Get(ctx, ref.Key())
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	return hashedCopy(ctx, rc, tmp, ref.Size+1, writeback)
}
