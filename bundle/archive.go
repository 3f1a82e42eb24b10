package bundle

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxArchiveBytes bounds what an archive may unpack to, so a hostile or
// corrupt archive cannot fill the disk.
const maxArchiveBytes = 64 << 30

// maxArchiveEntries bounds its files and directories: empty entries pass
// the byte cap and could still run the disk out of inodes. A bundle has a
// few files per graph and sample.
const maxArchiveEntries = 1 << 20

// IsArchive reports whether a path names a bundle archive (.tar, .tar.gz
// or .tgz) rather than a bundle directory.
func IsArchive(p string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// OpenArchive unpacks a bundle archive into a new directory under tmpRoot
// (os.TempDir() when empty) and opens it. The archive holds bundle.json at
// its root, or inside one top-level directory. Only regular files and
// directories are accepted: an entry that would land outside the bundle
// (absolute, "..", or through a link), a link, a device, or more than 64 GiB
// in all is refused. cleanup removes the unpacked copy; it is safe to call
// whatever OpenArchive returned.
func OpenArchive(archive, tmpRoot string) (b *Bundle, cleanup func(), err error) {
	cleanup = func() {}
	dir, err := os.MkdirTemp(tmpRoot, "tunefleet-bundle-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := unpack(archive, dir); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("bundle archive %s: %w", archive, err)
	}
	root := dir
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 1 && entries[0].IsDir() {
			root = filepath.Join(dir, entries[0].Name())
		}
	}
	if _, err := os.Stat(filepath.Join(root, ManifestName)); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("bundle archive %s holds no %s at its root or in one top-level directory", archive, ManifestName)
	}
	b, err = Open(root)
	if err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("bundle archive %s: %w", archive, err)
	}
	return b, cleanup, nil
}

func unpack(archive, dest string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	var zr *gzip.Reader
	if strings.HasSuffix(archive, ".gz") || strings.HasSuffix(archive, ".tgz") {
		if zr, err = gzip.NewReader(f); err != nil {
			return fmt.Errorf("not a gzip file: %w", err)
		}
		// One member only: zero padding after it (block-padded transfers)
		// is not another member to parse.
		zr.Multistream(false)
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	var total int64
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			if zr != nil {
				// tar stops at its end blocks; only reading gzip to its end
				// checks its CRC and length, the one checksum of the data.
				if _, err := io.Copy(io.Discard, zr); err != nil {
					return fmt.Errorf("corrupt gzip stream: %w", err)
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a tar archive, or a truncated one: %w", err)
		}
		name := h.Name
		clean := path.Clean(strings.TrimPrefix(name, "./"))
		if name == "" || path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(name, '\\') {
			return fmt.Errorf("entry %q would land outside the bundle", name)
		}
		if clean == "." {
			continue
		}
		if entries++; entries > maxArchiveEntries {
			return fmt.Errorf("holds more than %d entries", maxArchiveEntries)
		}
		target := filepath.Join(dest, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if h.Size < 0 || total > maxArchiveBytes {
				return fmt.Errorf("unpacks to more than %d GiB", maxArchiveBytes>>30)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			// O_EXCL: a second entry of the same name cannot overwrite the
			// first (or follow something planted there).
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("entry %q: %w", name, err)
			}
			_, err = io.CopyN(out, tr, h.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("entry %q: %w", name, err)
			}
		default:
			return fmt.Errorf("entry %q is a link or special file; bundles hold only regular files and directories", name)
		}
	}
}
