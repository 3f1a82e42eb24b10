package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}

// A FIFO where a bundle, a bundle's file or a fleet file is read is
// refused at once (exit 2, naming it), never waited on: its open would
// block until a writer came, and on main a nightly stalled on it for good.
func TestFIFOPathsAreRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, filepath.Join(dir, "pipe"))
	tarFIFO := mkfifo(t, filepath.Join(dir, "bundle.tar"))
	onnxFIFO := mkfifo(t, filepath.Join(dir, "model.onnx"))
	// A bundle whose bundle.json is a FIFO.
	b := bundletest.Write(t)
	if err := os.Remove(filepath.Join(b, "bundle.json")); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, filepath.Join(b, "bundle.json"))
	// A fleet file whose one entry's bundle is a FIFO archive.
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte("format: tunefleet.fleet/v1\nmodels:\n  - model: m\n    bundle: bundle.tar\n    targets: [cpu]\n    strategy: first-wins\n    candidates: [ort:cpu:basic]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := "file://" + filepath.Join(dir, "store")
	sub := []string{"--target", "cpu", "--strategy", "first-wins", "--candidates", "ort:cpu:basic", "--store", store}
	for _, args := range [][]string{
		{"bundle", "validate", tarFIFO},
		{"bundle", "validate", b},
		{"bundle", "from-onnx", onnxFIFO, "--out", filepath.Join(dir, "out")},
		append([]string{"submit", tarFIFO}, sub...),
		append([]string{"submit", b}, sub...),
		{"fleet", "validate", fifo},
		{"fleet", "validate", fleetFile},
		{"--store", store, "nightly", "--fleet", fifo},
		{"--store", store, "--redis", testsvc.Redis(t), "nightly", "--fleet", fleetFile},
	} {
		t.Run(filepath.Base(strings.Join(args, "_")), func(t *testing.T) {
			done := make(chan outcome, 1)
			go func() { done <- producer(t, args...) }()
			select {
			case o := <-done:
				if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "FIFO") {
					t.Errorf("want exit 2 naming the FIFO, got %s", o)
				}
			case <-time.After(time.Second):
				t.Fatalf("producer %q still running after 1s: it waits on the FIFO", args)
			}
		})
	}
}

// The helper process of TestSignalEndsABlockedCommand: a command blocked
// in an open(2) of a FIFO, which no context reaches.
func TestHelperBlockedInOpen(t *testing.T) {
	fifo := os.Getenv("TUNEFLEET_TEST_BLOCK_ON")
	if fifo == "" {
		t.Skip("the helper of TestSignalEndsABlockedCommand")
	}
	root := &cobra.Command{Use: "producer", RunE: func(*cobra.Command, []string) error {
		os.Stdout.WriteString("blocking\n")
		f, err := os.Open(fifo)
		if err == nil {
			f.Close()
		}
		return errors.New("the FIFO opened")
	}}
	os.Exit(cli.Execute(root, nil, os.Stdout, os.Stderr))
}

// SIGTERM ends a producer command within seconds even when it is blocked
// where no context reaches (on main it hung until SIGKILL).
func TestSignalEndsABlockedCommand(t *testing.T) {
	fifo := mkfifo(t, filepath.Join(t.TempDir(), "pipe"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBlockedInOpen$")
	cmd.Env = append(os.Environ(), "TUNEFLEET_TEST_BLOCK_ON="+fifo)
	// Synchronized: exec copies the child's output in its own goroutines
	// while this one polls it.
	var stdout, stderr testsvc.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "blocking") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // into the open
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(cli.StopGrace + 3*time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running %s after SIGTERM", time.Since(start))
	}
	if code := cmd.ProcessState.ExitCode(); code != cli.ExitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d, interrupted", code, stderr.String(), cli.ExitInterrupted)
	}
}
