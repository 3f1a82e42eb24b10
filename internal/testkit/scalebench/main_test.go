package scalebench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

// cliEnv starts this test binary as a `producer` or `worker` command:
// "producer\x1fARGS…" or "worker\x1fARGS…". The RSS benchmarks measure
// those commands as processes of their own.
const cliEnv = "TUNEFLEET_SCALEBENCH_CLI"

// hwmEnv names a file where such a command writes its peak RSS (VmHWM,
// KiB) when it ends. The process reads it itself: a child's rusage
// ru_maxrss is no good here, since Linux carries the peak of the memory
// the child shared with its parent before exec (Go starts children with
// vfork) into it, so every child would report the benchmark's own peak.
const hwmEnv = "TUNEFLEET_SCALEBENCH_HWM"

func TestMain(m *testing.M) {
	if args := os.Getenv(cliEnv); args != "" {
		parts := strings.Split(args, "\x1f")
		root := cli.NewProducer()
		if parts[0] == "worker" {
			root = cli.NewWorker()
		}
		code := cli.Execute(root, parts[1:], os.Stdout, os.Stderr)
		if path := os.Getenv(hwmEnv); path != "" {
			if kib, err := selfHWM(); err == nil {
				os.WriteFile(path, []byte(strconv.FormatInt(kib, 10)), 0o644)
			}
		}
		os.Exit(code)
	}
	// stack.Main serves ONNX Runtime session children (the in-process
	// workers' candidates run in them) and prints the summary at the end.
	stack.Main(m, stack.MainOptions{After: printSummary})
}

// selfHWM is this process's peak RSS in KiB (VmHWM in /proc/self/status).
func selfHWM() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
