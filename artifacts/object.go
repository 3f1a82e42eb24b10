package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Objects that are not blobs: their key is a name (a timing cache), not a
// digest, so nothing verifies them against one.

// UploadFile stores the file at path under key, replacing what is there.
func UploadFile(ctx context.Context, s Store, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// The file itself, not a wrapper: minio-go reads a seekable file's
	// parts in parallel instead of buffering them.
	if err := s.Put(ctx, key, f, st.Size()); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

// DownloadFile writes the object at key to dest. A missing key gives an
// error that wraps ErrNotExist, and leaves no dest behind, nor does a
// failed download.
func DownloadFile(ctx context.Context, s Store, key, dest string) error {
	_, err := download(ctx, s, key, dest, -1, io.Discard)
	return err
}

// download writes the object at key to dest, at most limit bytes of it
// (-1: all), also into tee, and returns how many bytes it wrote. dest is
// removed on failure.
func download(ctx context.Context, s Store, key, dest string, limit int64, tee io.Writer) (int64, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	f, err := os.Create(dest)
	if err != nil {
		return 0, err
	}
	var r io.Reader = ctxReader{ctx: ctx, r: rc}
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	n, err := io.Copy(io.MultiWriter(f, tee), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dest)
		return n, fmt.Errorf("download %s: %w", key, err)
	}
	return n, nil
}

// MaxJSONSize bounds a JSON manifest read back from a store (run.json,
// result.json, state.json, latest.json): the store, not the reader,
// decides an object's size, and a manifest is read into memory whole.
const MaxJSONSize = 256 << 20

// ErrTooLarge is wrapped by ReadObject's error for an object over its
// limit: the object's fault (what a reader may show as unreadable), not
// the store's.
var ErrTooLarge = errors.New("object too large")

// ReadObject reads a whole (small) object into memory, refusing one over
// limit bytes with an error that says so (wrapping ErrTooLarge).
func ReadObject(ctx context.Context, s Store, key string, limit int64) ([]byte, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx: ctx, r: rc}, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, s, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s in %s is over %d MiB, more than it can be: %w", key, s, limit>>20, ErrTooLarge)
	}
	return data, nil
}
