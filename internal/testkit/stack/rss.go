package stack

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory of processes, read from the kernel, for tests and benchmarks that
// bound it (internal/testkit/memtest, make bench-scale). Figures are bytes.

// PeakRSS is the peak resident set size of a running process (VmHWM in
// /proc/<pid>/status): what it held at its worst since it started, or since
// ResetPeakRSS.
func PeakRSS(pid int) (int64, error) { return procStatus(pid, "VmHWM") }

// RSS is the current resident set size of a running process (VmRSS).
func RSS(pid int) (int64, error) { return procStatus(pid, "VmRSS") }

// SelfPeakRSS is PeakRSS of the calling process.
func SelfPeakRSS() (int64, error) { return PeakRSS(os.Getpid()) }

// ResetPeakRSS sets a process's VmHWM back to its current RSS (Linux 4.0+,
// "5" to /proc/<pid>/clear_refs), so that a later PeakRSS measures from now.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSSFileEnv names a file a producer process (RunProducer) writes its
// own peak RSS into as it exits. The parent cannot read it afterwards: the
// rusage of a child counts the parent's own peak at the fork (Go's
// vfork-style exec shares the parent's memory map until exec), and /proc
// is gone once it exits.
const peakRSSFileEnv = "TUNEFLEET_STACK_PEAK_RSS_FILE"

// reportPeakRSS writes this process's peak RSS where peakRSSFileEnv says.
func reportPeakRSS() {
	if p := os.Getenv(peakRSSFileEnv); p != "" {
		if n, err := SelfPeakRSS(); err == nil {
			os.WriteFile(p, []byte(strconv.FormatInt(n, 10)), 0o644)
		}
	}
}

// readPeakRSS reads what reportPeakRSS wrote; 0 when nothing was.
func readPeakRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// MiB renders a byte count for messages.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func procStatus(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, key)
}
