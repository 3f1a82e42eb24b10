package artifacts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// tempPrefix starts the names of Local's temporary files. List skips them
// and keys may not use it, so an upload in progress (or one a crash left
// behind) is never mistaken for an object.
const tempPrefix = ".tunefleet-tmp-"

// Local is a Store in a local directory: key "a/b/c" is the file
// ROOT/a/b/c, so the directory is readable with ordinary tools and the keys
// are the same as on S3.
//
// Every file access goes through an [os.Root], so no key and no symbolic
// link inside the directory can reach a file outside it (links that stay
// inside are followed). Only regular files are objects.
type Local struct {
	dir  string // absolute path, for messages and Check
	root *os.Root
}

var _ Store = (*Local)(nil)

// NewLocal opens the directory store rooted at root, which must exist (Open
// creates it). The Local holds the directory open until Close.
func NewLocal(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local store %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("local store directory %s does not exist: create it or check --store", abs)
		}
		return nil, fmt.Errorf("local store directory %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local store %s is not a directory", abs)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("local store directory %s: %w", abs, err)
	}
	return &Local{dir: abs, root: r}, nil
}

// Dir is the store's directory (absolute).
func (l *Local) Dir() string { return l.dir }

// Close releases the directory handle. The Local must not be used after.
func (l *Local) Close() error { return l.root.Close() }

// String is the store's URL, file:///abs/dir.
func (l *Local) String() string { return "file://" + filepath.ToSlash(l.dir) }

// checkKey is CheckKey plus the one name Local reserves for itself.
func (l *Local) checkKey(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	for _, seg := range strings.Split(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return fmt.Errorf("object key %q: names starting with %q are reserved for temporary files", key, tempPrefix)
		}
	}
	return nil
}

// Put writes r to a temporary file beside the target, syncs it and renames
// it into place, so readers never see a partial object and a failed Put
// leaves the previous one. With size >= 0 the reader must yield exactly size
// bytes: a short or long reader is an error (a wrong size is a caller bug,
// and storing a truncated object would hide it).
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := l.write(ctx, "put", key, r, size, false)
	return err
}

// Create is Put where key holds no object; created false: one was there,
// and it is left as it was. The new file is linked in (link(2) fails where
// the name exists) rather than renamed over it, so two racing calls cannot
// both create.
func (l *Local) Create(ctx context.Context, key string, r io.Reader, size int64) (bool, error) {
	return l.write(ctx, "create", key, r, size, true)
}

var _ Creator = (*Local)(nil)

// write stores the object through a synced temporary file, renamed over
// key, or (exclusive) linked to it unless key exists.
func (l *Local) write(ctx context.Context, op, key string, r io.Reader, size int64, exclusive bool) (created bool, err error) {
	if err := l.checkKey(key); err != nil {
		return false, err
	}
	if size < -1 {
		return false, fmt.Errorf("%s %q to %s: invalid size %d", op, key, l, size)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s %q to %s: %w", op, key, l, err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s %q to %s: %w", op, key, l, err)
		}
	}()

	// The key's directory is opened once, and the temporary file, the
	// rename (or link) and the directory's sync are made through that one
	// handle: each path given to the store's root is resolved one segment
	// at a time, a few system calls a segment, so resolving the key's
	// directory for every step cost a write of a small object more than
	// the write itself (a nightly writes a dozen objects a model).
	d, f, tmp, err := l.createTempIn(path.Dir(key))
	if err != nil {
		return false, err
	}
	if d != l.root {
		defer d.Close()
	}
	base := path.Base(key)
	done := false
	defer func() {
		if !done {
			f.Close()
			d.Remove(tmp)
		}
	}()
	if err := copyExact(ctx, f, r, size); err != nil {
		return false, err
	}
	// Sync before the rename: after a crash the key holds the old object or
	// the complete new one, never a renamed file whose data was not written.
	if err := f.Sync(); err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if exclusive {
		err = d.Link(tmp, base)
		d.Remove(tmp)
		done = true
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
	} else {
		err = d.Rename(tmp, base)
	}
	if err != nil {
		if fi, serr := d.Lstat(base); serr == nil && fi.IsDir() {
			return false, fmt.Errorf("other keys exist under %q/, so it cannot also be an object", key)
		}
		return false, err
	}
	done = true
	syncDirOf(d)
	return true, nil
}

// copyExact copies r to f: exactly size bytes (-1: all there is), an error
// for a reader shorter or longer than it announced.
func copyExact(ctx context.Context, f io.Writer, r io.Reader, size int64) error {
	src := ctxReader{ctx: ctx, r: r}
	if size < 0 {
		_, err := io.Copy(f, src)
		return err
	}
	n, err := io.CopyN(f, src, size)
	if err == io.EOF {
		return fmt.Errorf("reader ended after %d of %d bytes", n, size)
	}
	if err != nil {
		return err
	}
	// One more read tells a reader that is longer than it said.
	var one [1]byte
	if m, _ := io.ReadFull(src, one[:]); m > 0 {
		return fmt.Errorf("reader has more than the %d bytes it announced", size)
	}
	return nil
}

// createTemp creates a new temporary file in dir (slash-separated, "." for
// the root), creating dir first; tmp is its name from the store's root.
func (l *Local) createTemp(dir string) (*os.File, string, error) {
	d, f, tmp, err := l.createTempIn(dir)
	if err != nil {
		return nil, "", err
	}
	if d != l.root {
		d.Close()
	}
	return f, filepath.Join(filepath.FromSlash(dir), tmp), nil
}

// createTempIn opens dir (slash-separated, "." for the root; created when
// missing) and creates a new temporary file in it: the directory's handle
// (the store's own root for "."; close any other), the file, and its name
// in the directory.
func (l *Local) createTempIn(dir string) (*os.Root, *os.File, string, error) {
	for attempt := 0; ; attempt++ {
		d, err := l.openDir(dir)
		if err != nil {
			return nil, nil, "", err
		}
		tmp := tempPrefix + rand.Text()
		f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return d, f, tmp, nil
		}
		if d != l.root {
			d.Close()
		}
		// A concurrent Delete may remove the directory after it was
		// opened when it was empty: open (and make) it again.
		if errors.Is(err, fs.ErrNotExist) && attempt < 5 {
			continue
		}
		return nil, nil, "", escapeHint(err)
	}
}

// openDir opens the directory dir of the store (created when missing): the
// store's own root for ".".
func (l *Local) openDir(dir string) (*os.Root, error) {
	if dir == "." {
		return l.root, nil
	}
	name := filepath.FromSlash(dir)
	if d, err := l.root.OpenRoot(name); err == nil {
		return d, nil
	}
	// Missing, or not a directory: MkdirAll makes it, or says why not.
	if err := l.root.MkdirAll(name, 0o755); err != nil {
		return nil, dirError(dir, err)
	}
	d, err := l.root.OpenRoot(name)
	if err != nil {
		return nil, dirError(dir, err)
	}
	return d, nil
}

// dirError explains why a key's directory could not be made or opened.
func dirError(dir string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("a path segment of %q is an object, so it cannot hold other keys: %w", dir, err)
	}
	return escapeHint(err)
}

// syncDirOf makes a rename in the directory d durable. Best effort: the
// rename has happened, and some file systems cannot sync a directory.
func syncDirOf(d *os.Root) {
	f, err := d.Open(".")
	if err != nil {
		return
	}
	f.Sync()
	f.Close()
}

// Get opens the object's file.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := l.checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %q from %s: %w", key, l, err)
	}
	// O_NONBLOCK: opening a FIFO planted in the store would otherwise wait
	// for a writer; it is refused below like any other non-regular file.
	f, err := l.root.OpenFile(filepath.FromSlash(key), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, l.wrapErr("get", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, l.wrapErr("get", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("get %q from %s: %w", key, l, ErrNotExist)
	}
	return f, nil
}

// Stat describes the object's file.
func (l *Local) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := l.checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, fmt.Errorf("stat %q in %s: %w", key, l, err)
	}
	fi, err := l.root.Stat(filepath.FromSlash(key))
	if err != nil {
		return ObjectInfo{}, l.wrapErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("stat %q in %s: %w", key, l, ErrNotExist)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// List walks the directory that holds prefix's last segment and keeps the
// regular files whose key starts with prefix (plain string match, as on S3;
// see CheckPrefix). Temporary files and symbolic links are not listed.
func (l *Local) List(ctx context.Context, prefix string) ([]string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	start := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = prefix[:i]
	}
	keys := []string{}
	err := fs.WalkDir(l.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll // nothing under this prefix
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			// Prune directories that cannot hold a matching key.
			if p != start && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(p, prefix) {
			keys = append(keys, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, l, escapeHint(err))
	}
	// WalkDir sorts names per directory, so it yields "a/b" before
	// "a.txt"; S3 orders whole keys bytewise ("a.txt" < "a/b").
	slices.Sort(keys)
	return keys, nil
}

// Delete removes the object's file and the directories it leaves empty, so
// that a deleted "a/b" does not keep "a" from becoming an object later.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := l.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %q from %s: %w", key, l, err)
	}
	name := filepath.FromSlash(key)
	fi, err := l.root.Lstat(name)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return fmt.Errorf("delete %q from %s: %w", key, l, escapeHint(err))
	}
	if fi.IsDir() {
		return nil // a directory of other keys, not an object
	}
	if err := l.root.Remove(name); err != nil && !isNotExist(err) {
		return fmt.Errorf("delete %q from %s: %w", key, l, escapeHint(err))
	}
	// Remove fails on a non-empty directory, which ends the climb.
	for d := path.Dir(key); d != "."; d = path.Dir(d) {
		if l.root.Remove(filepath.FromSlash(d)) != nil {
			break
		}
	}
	return nil
}

// Check verifies that the directory is still there, is the one opened, and
// is writable (a probe file is created and removed).
func (l *Local) Check(ctx context.Context) error {
	if err := l.checkDir(ctx); err != nil {
		return err
	}
	f, tmp, err := l.createTemp(".")
	if err != nil {
		return fmt.Errorf("local store directory %s is not writable: %w", l.dir, err)
	}
	f.Close()
	if err := l.root.Remove(tmp); err != nil {
		return fmt.Errorf("local store directory %s: removing a probe file: %w", l.dir, err)
	}
	return nil
}

// CheckRead is Check for readers (fetch, status): it verifies that the
// directory is there, is the one opened and can be listed, and writes
// nothing, so that deploy tooling with read-only access (a read-only mount,
// a directory it does not own) can fetch.
func (l *Local) CheckRead(ctx context.Context) error {
	if err := l.checkDir(ctx); err != nil {
		return err
	}
	d, err := l.root.Open(".")
	if err == nil {
		_, err = d.ReadDir(1)
		d.Close()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("local store directory %s is not readable: %w", l.dir, err)
	}
	return nil
}

// checkDir verifies that the directory is still there and is the one
// opened.
func (l *Local) checkDir(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check %s: %w", l, err)
	}
	fi, err := os.Stat(l.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("local store directory %s does not exist: create it or check --store", l.dir)
		}
		return fmt.Errorf("local store directory %s: %w", l.dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("local store %s is not a directory: check --store", l.dir)
	}
	if rfi, err := l.root.Stat("."); err != nil || !os.SameFile(fi, rfi) {
		return fmt.Errorf("local store directory %s was moved or replaced after it was opened: restart", l.dir)
	}
	return nil
}

// wrapErr turns a file error on key into one that wraps ErrNotExist when
// the object is missing (including when a path segment is a file).
func (l *Local) wrapErr(op, key string, err error) error {
	if isNotExist(err) {
		return fmt.Errorf("%s %q in %s: %w", op, key, l, ErrNotExist)
	}
	return fmt.Errorf("%s %q in %s: %w", op, key, l, escapeHint(err))
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// escapeHint explains os.Root's "path escapes from parent", which is what a
// symbolic link leading out of the store gives.
func escapeHint(err error) error {
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%w (a symbolic link in the store leads outside it; refusing to follow)", err)
	}
	return err
}

// ctxReader stops a copy when the context ends, so a cancelled Put does not
// read a slow source to its end.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
