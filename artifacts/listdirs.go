package artifacts

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
)

// DirLister is a Store that lists one level of its keys: the names of the
// "directories" right under a prefix (S3's listing with a delimiter), so
// that what walks models/<model>/<platform>/ need not list every key under
// them (each model's whole history).
type DirLister interface {
	ListDirs(ctx context.Context, prefix string) ([]string, error)
}

// ListDirs lists, sorted, the names of the directories right under prefix
// (which ends in "/", or is "" for the top): for "models/", each model
// with anything stored. A
// store that is no DirLister lists every key under prefix to find them.
func ListDirs(ctx context.Context, s Store, prefix string) ([]string, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("list the directories under %q: the prefix must end in '/'", prefix)
	}
	if d, ok := s.(DirLister); ok {
		return d.ListDirs(ctx, prefix)
	}
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if name, _, ok := strings.Cut(strings.TrimPrefix(k, prefix), "/"); ok && name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ListDirs reads the directory of prefix: its subdirectories, but for the
// store's own temporary ones.
func (l *Local) ListDirs(ctx context.Context, prefix string) ([]string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(prefix, "/")
	if dir == "" {
		dir = "."
	}
	entries, err := fs.ReadDir(l.root.FS(), dir)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the directories under %q in %s: %w", prefix, l, escapeHint(err))
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), tempPrefix) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// ListDirs lists with a delimiter: S3 answers the common prefixes, one
// per directory, not the keys under them.
func (s *S3) ListDirs(ctx context.Context, prefix string) ([]string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []string
	full := s.prefix + prefix
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: false}) {
		if obj.Err != nil {
			return nil, s.opError(ctx, "list", prefix, obj.Err)
		}
		if name, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, full), "/"); ok && name != "" && !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
