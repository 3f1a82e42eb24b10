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
	"syscall"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// ArchiveLimits bound what unpacking a bundle archive may cost, so that a
// hostile or corrupt archive (a gzip bomb: a megabyte that inflates to a
// gigabyte) cannot fill the disk it is unpacked to. Each is checked before
// a byte beyond it is written.
type ArchiveLimits struct {
	// MaxBytes bounds the unpacked size of all regular files together. An
	// entry whose declared size would cross it is refused before any of
	// it is written (tar sizes cannot lie: the reader stops at them).
	MaxBytes int64
	// MaxEntries bounds files and directories: empty entries pass the byte
	// cap and could still run the disk out of inodes.
	MaxEntries int
	// MaxRatio bounds unpacked bytes per compressed byte read, once more
	// than RatioFloor bytes are unpacked; 0 turns it off. This is what
	// stops a bomb early: real bundles (float weights and samples) inflate
	// by a few times, a bomb by a thousand.
	MaxRatio int64
	// RatioFloor is the unpacked size below which the ratio is not
	// checked (small archives of zero-filled samples are fine).
	RatioFloor int64
}

// DefaultArchiveLimits: 8 GiB unpacked (twice MaxTensorBytes' 4 GiB ONNX
// weights plus samples). It is what the deployment's volumes are sized
// against: the producer's TMPDIR, where an archive is unpacked (the
// nightly pod's 8Gi /tmp), and a worker's --work-dir, where a task's graph
// is downloaded and its engines built (20Gi on a CPU worker, 100Gi on a
// GPU one; internal/testkit/deploycheck wants each at least this), 100,000
// entries (a bundle has about two files per sample), and a compression ratio of at most 100:1 beyond the first
// 64 MiB. A legitimate larger or more compressible bundle is passed as a
// directory, which is not unpacked, or opened with OpenArchiveWith.
func DefaultArchiveLimits() ArchiveLimits {
	return ArchiveLimits{MaxBytes: 8 << 30, MaxEntries: 100_000, MaxRatio: 100, RatioFloor: 64 << 20}
}

// mib renders a byte count for messages.
func mib(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

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
// (absolute, "..", or through a link), a link or a device is refused, and
// so is anything beyond DefaultArchiveLimits.
// cleanup removes the unpacked copy; it is safe to call whatever
// OpenArchive returned.
func OpenArchive(archive, tmpRoot string) (b *Bundle, cleanup func(), err error) {
	return OpenArchiveWith(archive, tmpRoot, DefaultArchiveLimits())
}

// OpenArchiveWith is OpenArchive with the given limits.
func OpenArchiveWith(archive, tmpRoot string, lim ArchiveLimits) (b *Bundle, cleanup func(), err error) {
	cleanup = func() {}
	dir, err := os.MkdirTemp(tmpRoot, "tunefleet-bundle-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := unpack(archive, dir, lim); err != nil {
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

// countingReader counts the bytes read through it: the compressed bytes
// consumed so far, for the ratio check.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// freeBytes is the space left to unprivileged users on dir's filesystem,
// or -1 when it cannot be told.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// unpack extracts archive into dest in two passes: the first reads it
// through without writing anything (names, kinds, entry count, sizes,
// compression ratio, duplicates), so that a hostile archive, a bomb of
// bytes or of entries included, is refused having cost CPU but no disk;
// the second writes it, checking again (the file may have changed).
func unpack(archive, dest string, lim ArchiveLimits) error {
	if err := extract(archive, dest, lim, true); err != nil {
		return err
	}
	return extract(archive, dest, lim, false)
}

func extract(archive, dest string, lim ArchiveLimits, dry bool) error {
	f, err := fsutil.OpenRegular(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	compressed := &countingReader{r: f}
	var r io.Reader = compressed
	var zr *gzip.Reader
	if strings.HasSuffix(archive, ".gz") || strings.HasSuffix(archive, ".tgz") {
		if zr, err = gzip.NewReader(compressed); err != nil {
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
	seen := map[string]bool{}
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
		if entries++; entries > lim.MaxEntries {
			return fmt.Errorf("holds more than %d entries, the limit (bundle.ArchiveLimits)", lim.MaxEntries)
		}
		target := filepath.Join(dest, filepath.FromSlash(clean))
		if dry {
			if h.Typeflag == tar.TypeReg && seen[clean] {
				return fmt.Errorf("entry %q: %s (the archive holds it twice)", name, os.ErrExist)
			}
			seen[clean] = true
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if dry {
				continue
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if h.Size < 0 || h.Size > lim.MaxBytes-total {
				return fmt.Errorf("unpacks to more than %s, the limit (bundle.ArchiveLimits; pass a large bundle as a directory)", mib(lim.MaxBytes))
			}
			if free := freeBytes(dest); free >= 0 && h.Size > free {
				return fmt.Errorf("entry %q needs %d bytes, %s has %d free", name, h.Size, dest, free)
			}
			total += h.Size
			if dry {
				if err := copyChecked(io.Discard, tr, h.Size, total-h.Size, compressed, zr != nil, lim); err != nil {
					return fmt.Errorf("entry %q: %w", name, err)
				}
				continue
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
			err = copyChecked(out, tr, h.Size, total-h.Size, compressed, zr != nil, lim)
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

// copyChecked copies one entry of n bytes in chunks, checking after each
// that the archive as a whole (before bytes unpacked before it) stays
// within the compression ratio, so a bomb is refused after at most
// RatioFloor bytes plus a chunk rather than at its end.
func copyChecked(dst io.Writer, src io.Reader, n, before int64, compressed *countingReader, gz bool, lim ArchiveLimits) error {
	const chunk = 1 << 20
	for done := int64(0); done < n; {
		k := min(chunk, n-done)
		if _, err := io.CopyN(dst, src, k); err != nil {
			return err
		}
		done += k
		unpacked := before + done
		if gz && lim.MaxRatio > 0 && unpacked > lim.RatioFloor && unpacked > lim.MaxRatio*compressed.n {
			return fmt.Errorf("inflates more than %d times (%d bytes from %d compressed): a compression ratio no bundle has; refused as a gzip bomb", lim.MaxRatio, unpacked, compressed.n)
		}
	}
	return nil
}
