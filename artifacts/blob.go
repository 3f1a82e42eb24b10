package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Ref names a content-addressed blob: its sha256 (lowercase hex) and size.
// Payloads and manifests carry Refs, never the bytes.
type Ref struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Key is where the blob lives (BlobKey).
func (r Ref) Key() string { return BlobKey(r.SHA256) }

// Validate rejects a Ref that could not have come from PutFile/PutBytes,
// so a malformed manifest cannot make a download address another key.
func (r Ref) Validate() error {
	if len(r.SHA256) != sha256.Size*2 {
		return fmt.Errorf("blob ref %q: sha256 must be %d hex digits", r.SHA256, sha256.Size*2)
	}
	for _, c := range r.SHA256 {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("blob ref %q: sha256 must be lowercase hex", r.SHA256)
		}
	}
	if r.Size < 0 {
		return fmt.Errorf("blob ref %s: negative size %d", r.SHA256, r.Size)
	}
	return nil
}

// PutFile stores the file at path as a blob. It reads the file twice, never
// holding it in memory: once to hash it, then (only when the store has no
// blob with those bytes under the digest already) to upload it. An existing
// blob is re-read and re-hashed first (present): one that rotted is
// overwritten with the right bytes. A retried task
// therefore uploads nothing twice. If the file changes between the passes,
// the upload is deleted and PutFile fails rather than leave a blob whose
// bytes do not match its name.
func PutFile(ctx context.Context, s Store, path string) (Ref, error) {
	f, err := os.Open(path)
	if err != nil {
		return Ref{}, fmt.Errorf("put blob: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx: ctx, r: f})
	if err != nil {
		return Ref{}, fmt.Errorf("put blob: hashing %s: %w", path, err)
	}
	return putOpen(ctx, s, path, f, Ref{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n})
}

// PutFileAs stores the file at path as the blob ref, whose digest the
// caller computed already (a result lists its artifacts' digests), so the
// file is read once: only for the upload, and only when the store lacks
// the blob or holds other bytes under its digest (present). The upload is hashed on the way; if the bytes do not match
// ref, the upload is deleted and PutFileAs fails.
func PutFileAs(ctx context.Context, s Store, path string, ref Ref) (Ref, error) {
	if err := ref.Validate(); err != nil {
		return Ref{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Ref{}, fmt.Errorf("put blob: %w", err)
	}
	defer f.Close()
	return putOpen(ctx, s, path, f, ref)
}

// storedMatches says whether the stored blob has ref's size and digest.
func storedMatches(ctx context.Context, s Store, ref Ref) bool {
	return VerifyBlob(ctx, s, ref) == nil
}

// PutBytes stores b as a blob (for small things; large ones go through
// PutFile), skipping the upload when it is already there.
func PutBytes(ctx context.Context, s Store, b []byte) (Ref, error) {
	sum := sha256.Sum256(b)
	ref := Ref{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}
	if have, err := present(ctx, s, ref); err != nil || have {
		return ref, err
	}
	return PutFreshBytes(ctx, s, b)
}

// PutFreshBytes stores b as a blob without looking for it first: for
// bytes no store can hold yet (a document stamped with the moment it was
// made), where PutBytes's look would be a round trip that always misses.
// Writing a blob again is harmless: same key, same bytes.
func PutFreshBytes(ctx context.Context, s Store, b []byte) (Ref, error) {
	sum := sha256.Sum256(b)
	ref := Ref{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}
	if err := s.Put(ctx, ref.Key(), bytes.NewReader(b), ref.Size); err != nil {
		return Ref{}, fmt.Errorf("put blob %s: %w", ref.Key(), err)
	}
	return ref, nil
}

// present says whether the blob is already stored with the right bytes.
// Size is not enough: a bit-flipped blob keeps its size, and one skipped
// here would stay broken for good (reuse and re-runs would point at it). So
// the object is re-hashed (VerifyBlob: one streaming read); a missing,
// resized or rotted one is (over)written by the caller.
func present(ctx context.Context, s Store, ref Ref) (bool, error) {
	// No Stat first: VerifyBlob's GET answers "missing" as fast as a HEAD,
	// reads at most one byte past ref.Size of an oversized object, and a
	// HEAD before it would cost every existing blob one more round trip.
	switch err := VerifyBlob(ctx, s, ref); {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrNotExist):
		return false, nil // missing, resized or rotted: write it
	default:
		return false, fmt.Errorf("put blob: %w", err)
	}
}

// FetchFile downloads the blob to dest, verifying it: the stream is hashed
// while it is written to a temporary file beside dest, which is renamed into
// place only when the sha256 and the size match ref. A mismatch is an error
// naming the key and both digests, and leaves no file. A dest that already
// has the right content is left alone (nothing is downloaded). Missing
// parent directories of dest are created.
func FetchFile(ctx context.Context, s Store, ref Ref, dest string) error {
	return fetchFile(ctx, s, ref, dest, false)
}

// fetchFile is FetchFile; writeback starts writing the file to disk during
// the download, for a caller that fsyncs it before it is used (Fetch).
func fetchFile(ctx context.Context, s Store, ref Ref, dest string, writeback bool) (err error) {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("fetch %s: %w", dest, err)
	}
	if ok, err := fileHas(ctx, dest, ref); err != nil || ok {
		if ok {
			reportSkipped(ctx, ref.Size)
		}
		return err
	}
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dest)+".fetching-*")
	if err != nil {
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	got, n, err := downloadHashed(ctx, s, ref.Key(), ref.Size, tmp, writeback)
	switch {
	case errors.Is(err, ErrNotExist):
		return fmt.Errorf("fetch blob: %w", err)
	case err != nil:
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	if n != ref.Size || got != ref.SHA256 {
		what := fmt.Sprintf("%d bytes", n)
		if n > ref.Size {
			what = "more than the expected size"
		}
		return fmt.Errorf("verification failed (digest): blob %s in %s is corrupt or truncated: expected sha256 %s (%d bytes), got sha256 %s (%s): %w",
			ref.Key(), s, ref.SHA256, ref.Size, got, what, ErrCorrupt)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	// No fsync: a reader re-hashes a file before trusting it (fileHas),
	// so a crash cannot make a torn file pass; Fetch syncs the whole tree
	// once before its final rename (its writeback, started during the
	// download, leaves that fsync little to wait for), and a worker's
	// bundle is scratch. An fsync per blob cost a third of a download's
	// time.
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	return nil
}

// fileHas says whether path is a regular file with ref's size and digest.
func fileHas(ctx context.Context, path string, ref Ref) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fetch blob %s: %w", ref.Key(), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != ref.Size {
		return false, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx: ctx, r: f}); err != nil {
		return false, fmt.Errorf("fetch blob %s: checking %s: %w", ref.Key(), path, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == ref.SHA256, nil
}

// PutJSON writes v as indented JSON under key, atomically (Store.Put).
func PutJSON(ctx context.Context, s Store, key string, v any) error {
	b, err := encodeJSON(key, v)
	if err != nil {
		return err
	}
	if err := s.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return err
	}
	return nil
}

// encodeJSON is how every JSON document is stored: indented, one newline
// at the end.
func encodeJSON(key string, v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	return append(b, '\n'), nil
}

// GetJSON decodes the JSON object under key into v. A missing key wraps
// ErrNotExist; a decode error names the key and the store.
func GetJSON(ctx context.Context, s Store, key string, v any) error {
	data, err := ReadObject(ctx, s, key, MaxJSONSize)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s in %s: %w", key, s, err)
	}
	return nil
}
