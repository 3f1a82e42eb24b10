package jobs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A task's scratch directory (its graph's bundle and the tuner's output,
// gigabytes for a large model) is removed when the task ends. A worker
// killed mid-task leaves it behind, so its name carries the worker's pid,
// and a worker starting on the same work directory removes those of
// workers that are gone.

const scratchPrefix = "tunefleet-task-"

// newScratch makes a task's scratch directory in workDir.
func newScratch(workDir string) (string, error) {
	return os.MkdirTemp(workDir, fmt.Sprintf("%s%d-", scratchPrefix, os.Getpid()))
}

// removeStaleScratch removes the scratch directories in workDir left by
// workers that no longer run, and returns how many it removed. A pid that
// is alive (this worker's, or a reused one) keeps its directories.
func removeStaleScratch(workDir string) (int, error) {
	entries, err := os.ReadDir(workDir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), scratchPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		num, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue // not ours to judge, or its worker lives
		}
		if err := os.RemoveAll(filepath.Join(workDir, e.Name())); err != nil {
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
