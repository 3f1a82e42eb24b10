package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// ErrCorrupt marks a stored blob whose bytes do not hash to its key (bit
// rot, a truncated or foreign write): it must be repaired or not used.
var ErrCorrupt = errors.New("blob is corrupt")

// VerifyBlob re-hashes the stored blob ref names, streaming it (one GET,
// nothing held in memory, at most one byte read past ref.Size). It returns
// nil when the blob has ref's size and sha256, an error wrapping
// ErrNotExist when it is missing, one wrapping ErrCorrupt when its bytes
// differ, and the store's error otherwise.
//
// Size and stored checksum metadata are not enough: a bit-flipped object
// keeps both (S3's x-amz-checksum-sha256 is what the upload carried, not
// what the disk holds now), and FetchFile would refuse it only at deploy
// time. Re-reading costs one download of the blob; callers use it where a
// wrong "yes, it is there" would be kept for good (upload skips, reuse).
func VerifyBlob(ctx context.Context, s Store, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("verify blob: %w", err)
	}
	rc, err := s.Get(ctx, ref.Key())
	if err != nil {
		return fmt.Errorf("verify blob %s: %w", ref.Key(), err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(ctxReader{ctx: ctx, r: rc}, ref.Size+1))
	if err != nil {
		return fmt.Errorf("verify blob %s in %s: %w", ref.Key(), s, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != ref.Size || got != ref.SHA256 {
		what := fmt.Sprintf("%d bytes", n)
		if n > ref.Size {
			what = "more than the expected size"
		}
		return fmt.Errorf("blob %s in %s: sha256 %s (%s), want %s (%d bytes): %w", ref.Key(), s, got, what, ref.SHA256, ref.Size, ErrCorrupt)
	}
	return nil
}
