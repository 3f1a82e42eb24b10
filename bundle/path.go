package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// Resolve turns a path from bundle.json into a path under root, refusing
// anything that could leave the bundle: absolute paths, ".." components,
// backslashes, and symbolic links that point outside root.
func Resolve(root, rel string) (string, error) {
	if err := checkBundlePath(rel); err != nil {
		return "", err
	}
	p := filepath.Join(root, filepath.FromSlash(rel))
	// Compared as absolute paths: a root of "." resolves to "." while the
	// file resolves to "graphs/…", which would not look inside it.
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(absRoot, filepath.FromSlash(rel)))
	if err != nil {
		return "", notInBundle(rel, err)
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leads outside the bundle (through a symbolic link to %s)", rel, real)
	}
	return p, nil
}

// checkBundlePath refuses a bundle path that is empty, absolute, or climbs out.
func checkBundlePath(rel string) error {
	if rel == "" {
		return fmt.Errorf("empty path")
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return fmt.Errorf("path %q is absolute; paths in a bundle are relative to its root", rel)
	}
	if strings.ContainsRune(rel, '\\') || strings.ContainsRune(rel, 0) {
		return fmt.Errorf("path %q contains a backslash or NUL; use '/' separators", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return fmt.Errorf("path %q escapes the bundle (contains \"..\")", rel)
		}
	}
	return nil
}

// notInBundle is the error of a path that does not resolve.
func notInBundle(rel string, err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("path %q does not exist in the bundle", rel)
	}
	return err
}

// resolver is Resolve for one bundle, which remembers the real path of the
// bundle's root and of each directory it resolved. Resolve evaluates every
// symbolic link from the file system's root to the file, a system call a
// path segment, root included, for every file: opening and hashing a
// bundle of 500 graphs (1,500 files, each resolved three times) spent most
// of its time there. A file is still resolved as Resolve would, its last
// segment looked at every time; only its directory's resolution, made
// while the same bundle is opened or hashed, is reused.
type resolver struct {
	root string

	mu       sync.Mutex
	absRoot  string
	realRoot string
	rootErr  error
	dirs     map[string]string // bundle-relative directory → its real path
}

func newResolver(root string) *resolver { return &resolver{root: root} }

// resolve is Resolve(r.root, rel).
func (r *resolver) resolve(rel string) (string, error) {
	if err := checkBundlePath(rel); err != nil {
		return "", err
	}
	p := filepath.Join(r.root, filepath.FromSlash(rel))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.absRoot == "" && r.rootErr == nil {
		r.absRoot, r.rootErr = filepath.Abs(r.root)
		if r.rootErr == nil {
			r.realRoot, r.rootErr = filepath.EvalSymlinks(r.absRoot)
		}
		r.dirs = map[string]string{}
	}
	if r.rootErr != nil {
		return "", r.rootErr
	}
	dir, base := path.Split(path.Clean(rel))
	realDir, err := r.realDir(path.Clean(dir))
	if err != nil {
		return "", notInBundle(rel, err)
	}
	real, err := realPath(realDir, base)
	if err != nil {
		return "", notInBundle(rel, err)
	}
	if real != r.realRoot && !strings.HasPrefix(real, r.realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leads outside the bundle (through a symbolic link to %s)", rel, real)
	}
	return p, nil
}

// realDir is the real path of the bundle-relative directory dir, built
// from its parent's (remembered) one segment at a time.
func (r *resolver) realDir(dir string) (string, error) {
	if dir == "." || dir == "" {
		return r.realRoot, nil
	}
	if real, ok := r.dirs[dir]; ok {
		return real, nil
	}
	parent, base := path.Split(dir)
	realParent, err := r.realDir(path.Clean(parent))
	if err != nil {
		return "", err
	}
	real, err := realPath(realParent, base)
	if err != nil {
		return "", err
	}
	r.dirs[dir] = real
	return real, nil
}

// realPath is the real path of name in the directory whose real path is
// realDir: EvalSymlinks's answer, with one Lstat where name is no link.
func realPath(realDir, name string) (string, error) {
	real := filepath.Join(realDir, name)
	fi, err := os.Lstat(real)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && !os.IsNotExist(err) {
			err = pe.Err // as EvalSymlinks says it
		}
		return "", err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return filepath.EvalSymlinks(real)
	}
	return real, nil
}
