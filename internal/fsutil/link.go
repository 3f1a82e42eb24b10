package fsutil

import (
	"io"
	"os"
	"path/filepath"
)

// LinkOrCopy makes dst (which must not exist) a copy of src: a hard link
// where the file system allows one (the same bytes, no second copy of a
// model's weights), a byte copy otherwise (another device, a file system
// without links). Parent folders of dst are made as needed.
func LinkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
