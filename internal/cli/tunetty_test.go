//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/tunefleet/tunefleet/internal/cli"
)

// openPTY opens a pseudo-terminal: what worker tune writes to the slave
// reaches the master as a terminal would show it. Both close at the end.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	ioctl := func(req uintptr, arg unsafe.Pointer) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), req, uintptr(arg)); errno != 0 {
			t.Fatalf("ioctl %#x on /dev/ptmx: %v", req, errno)
		}
	}
	var unlock int32
	ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	// 300 columns: the status line is drawn whole, not cut to fit.
	ws := struct{ rows, cols, x, y uint16 }{50, 300, 0, 0}
	ioctl(syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty's slave: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// On a terminal, worker tune's status line is cleared before the table is
// printed: the header starts a line of its own, instead of being glued to
// the last status ("… · batch 4 · 812 callsGRAPH CANDIDATE …", issue 18).
// stdout and stderr are one real pseudo-terminal, as in a shell; the tune
// is real (ONNX Runtime).
func TestWorkerTuneClearsItsStatusLineBeforeTheTable(t *testing.T) {
	t.Parallel()
	dir := mlpBundle(t)
	master, slave := openPTY(t)
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&screen, master) // ends with EIO once the slave is closed
		close(read)
	}()
	code := cli.ExecuteContext(context.Background(), cli.NewWorker(), []string{"tune", dir, "--candidates", "ort:cpu:basic,ort:cpu:all",
		"--strategy", "max-throughput", "--bench-time", "300ms", "--out", filepath.Join(t.TempDir(), "out")}, slave, slave)
	slave.Close()
	<-read
	out := screen.String()
	if code != cli.ExitOK {
		t.Fatalf("worker tune: exit %d:\n%q", code, out)
	}
	// The status line was drawn (the terminal path ran).
	status := regexp.MustCompile(`graph 0 · candidate \d/2 ort:cpu:\w+ · benchmark · batch \d+ · \d+ calls`)
	if !status.MatchString(out) {
		t.Fatalf("no status line on the terminal:\n%q", out)
	}
	// Its call counter moves (issue 18: it always showed 0).
	if !regexp.MustCompile(`· [1-9]\d* calls`).MatchString(out) {
		t.Errorf("the status line's call counter never left 0:\n%q", out)
	}
	// The table's header starts a line: a clear-line (or a new
	// line) right before it, never the status's text.
	i := strings.Index(out, "GRAPH")
	if i < 0 {
		t.Fatalf("no table on the terminal:\n%q", out)
	}
	before := out[max(0, i-80):i]
	if !strings.HasSuffix(before, "\r\x1b[K") && !strings.HasSuffix(before, "\n") {
		t.Errorf("the table header is glued to what came before it: …%q + GRAPH", before)
	}
}
