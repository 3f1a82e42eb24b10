package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A process's temporary directories (a task's scratch, a fetched bundle,
// gigabytes for a large model) are removed when it is done with them. A
// process killed first leaves them behind, so their names carry its pid,
// and the next process of the same kind on the same directory removes
// those of processes that are gone.

// MkdirTempOwned makes a new directory in dir ("": os.TempDir()) named
// prefix, this process's pid, "-" and a random part: one RemoveOrphans
// removes once this process is gone.
func MkdirTempOwned(dir, prefix string) (string, error) {
	return os.MkdirTemp(dir, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// RemoveOrphans removes the directories MkdirTempOwned made in dir ("":
// os.TempDir()) with prefix for processes that no longer run, and returns
// how many it removed. A pid that is alive (this process's, or a reused
// one) keeps its directories; names that carry no pid are not judged.
func RemoveOrphans(dir, prefix string) (int, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		num, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue // not ours to judge, or its process lives
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
