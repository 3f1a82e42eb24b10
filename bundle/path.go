package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Resolve turns a path from bundle.json into a path under root, refusing
// anything that could leave the bundle: absolute paths, ".." components,
// backslashes, and symbolic links that point outside root.
func Resolve(root, rel string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("empty path")
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("path %q is absolute; paths in a bundle are relative to its root", rel)
	}
	if strings.ContainsRune(rel, '\\') || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("path %q contains a backslash or NUL; use '/' separators", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q escapes the bundle (contains \"..\")", rel)
		}
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
		if os.IsNotExist(err) {
			return "", fmt.Errorf("path %q does not exist in the bundle", rel)
		}
		return "", err
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leads outside the bundle (through a symbolic link to %s)", rel, real)
	}
	return p, nil
}
