package artifacts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotExist is returned (wrapped) when a key has no object.
var ErrNotExist = errors.New("object does not exist")

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is an object store with slash-separated keys: S3-compatible storage
// through minio-go, or a local directory. Implementations are safe for
// concurrent use. Every write is atomic: a reader sees the old object, the
// new one, or none, never a part.
type Store interface {
	// Put stores size bytes read from r under key (size -1: unknown),
	// replacing any object there.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens an object for reading. A missing key gives an error that
	// wraps ErrNotExist.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes an object; a missing key wraps ErrNotExist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns the keys under prefix (recursively), sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes an object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Check verifies that the store is reachable, the bucket exists and the
	// credentials are accepted, with one message naming what to fix.
	Check(ctx context.Context) error
	// String names the store for messages (never with credentials).
	String() string
}

// Creator is a Store that can write an object only where none is, in one
// step (S3's conditional write; a hard link in a local directory).
type Creator interface {
	// Create stores size bytes from r under key unless key holds an
	// object; created false: it did, and that object is left as it was.
	Create(ctx context.Context, key string, r io.Reader, size int64) (created bool, err error)
}

// PutNewJSON is PutNew of v encoded as PutJSON encodes it.
func PutNewJSON(ctx context.Context, s Store, key string, v any) (bool, error) {
	b, err := encodeJSON(key, v)
	if err != nil {
		return false, err
	}
	return PutNew(ctx, s, key, b)
}

// PutNew writes an object only where none is and reports whether it wrote:
// one request where the store is a Creator, a Stat and a Put otherwise
// (there, two writers racing both write: hold a lock around the call).
func PutNew(ctx context.Context, s Store, key string, data []byte) (bool, error) {
	return PutNewFrom(ctx, s, key, bytes.NewReader(data), int64(len(data)))
}

// PutNewFrom is PutNew of the size bytes r reads (a document written to a
// file rather than held).
func PutNewFrom(ctx context.Context, s Store, key string, r io.Reader, size int64) (bool, error) {
	if c, ok := s.(Creator); ok {
		return c.Create(ctx, key, r, size)
	}
	switch _, err := s.Stat(ctx, key); {
	case err == nil:
		return false, nil
	case !errors.Is(err, ErrNotExist):
		return false, err
	}
	if err := s.Put(ctx, key, r, size); err != nil {
		return false, err
	}
	return true, nil
}
