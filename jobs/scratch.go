package jobs

import "github.com/tunefleet/tunefleet/internal/fsutil"

// A task's scratch directory (its graph's bundle and the tuner's output,
// gigabytes for a large model) is removed when the task ends. A worker
// killed mid-task leaves it behind, so its name carries the worker's pid
// (fsutil.MkdirTempOwned), and a worker starting on the same work
// directory removes those of workers that are gone; so does a producer
// whose inline finalize spooled there (spools) the first time it
// finalizes.

const scratchPrefix = "tunefleet-task-"

// newScratch makes a task's scratch directory in workDir.
func newScratch(workDir string) (string, error) {
	return fsutil.MkdirTempOwned(workDir, scratchPrefix)
}

// removeStaleScratch removes the scratch directories in workDir left by
// processes that no longer run, and returns how many it removed.
func removeStaleScratch(workDir string) (int, error) {
	return fsutil.RemoveOrphans(workDir, scratchPrefix)
}
