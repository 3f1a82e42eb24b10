package faults_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// smallDisk mounts a tmpfs of size on a new directory (root only), and
// unmounts it when the test ends. Without the right to mount, the test is
// skipped, or fails when CI is set: CI runs as root on this machine kind.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "mounting a " + size + " tmpfs for a store that fills up: " + strings.TrimSpace(string(out)) + " (" + err.Error() + "); the test needs root"
		if testsvc.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file into dir until the file system is full, and returns
// its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Small writes may still find a partly used page: take that too.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	return p
}

// A local store that fills up while a worker tunes: every failed attempt is
// one line in the worker's log and shows in `producer status`, and the run
// completes once space is freed (retries are budgeted by time, not count).
func TestLocalStoreFillsUp(t *testing.T) {
	sc := begin(t, 8, "a local store on a 24 MiB tmpfs filled to the last byte after submit, freed after two failed attempts")
	disk := smallDisk(t, "24m")
	store := filepath.Join(disk, "store")
	s := stack.New(t, stack.Options{StoreDir: store})
	const model = "faults.DiskFull"
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8))
	run, _ := s.Submit(dir, "--candidates", "ort:cpu:basic")
	filler := fill(t, disk)
	w := s.StartWorker(stack.WorkerOptions{})
	s.WaitAttempt(run, "0", 3, leaseWait)
	st, _ := s.Status(run)
	if g := st.Graphs["0"]; g.Status != "pending" || g.LastError == "" || g.Attempts < 2 {
		t.Errorf("status while the disk is full: graph 0 %+v, want pending with its last error and attempts", g)
	}
	sc.assert("status shows last_error, attempts")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.WaitFinal(run, leaseWait)
	checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	wantMatch(t, sc, "worker log", w.Log(), `run \S+ graph 0 attempt 1 failed \(infrastructure\), will retry: .*no space left on device`)
	wantMatch(t, sc, "worker log", w.Log(), `run \S+ graph 0 attempt 2 failed \(infrastructure\), will retry: `)
	_ = time.Second
}
