package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular marks a path that names something other than a regular
// file where one is read: a FIFO (whose open blocks until a writer comes),
// a device, a socket. Callers treat it as bad input.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading only if it is a regular file (after
// symlinks), at once: it opens without blocking (O_NONBLOCK, which a FIFO
// with no writer would otherwise wait on forever and signals would not
// end), and checks what it opened, so a path swapped in between is caught.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, NotRegular(path, fi.Mode())
	}
	// Regular files ignore O_NONBLOCK; reads through f block as usual.
	return f, nil
}

// CheckRegular says whether path is a regular file, without opening it.
func CheckRegular(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return NotRegular(path, fi.Mode())
	}
	return nil
}

// ReadRegular is os.ReadFile of a regular file only.
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// NotRegular is the error for path of mode m: what it is, and what was
// wanted.
func NotRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, kind(m))}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (mode " + m.String() + ")"
}
