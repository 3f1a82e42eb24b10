package scalebench

import (
	"os"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/stack"
)

// cliEnv starts this test binary as a `producer` or `worker` command:
// "producer\x1fARGS…" or "worker\x1fARGS…". The RSS benchmarks measure
// those commands as processes of their own, whose peak RSS the kernel
// reports when they exit (rusage), so nothing else of the benchmark's
// process counts.
const cliEnv = "TUNEFLEET_SCALEBENCH_CLI"

func TestMain(m *testing.M) {
	if args := os.Getenv(cliEnv); args != "" {
		parts := strings.Split(args, "\x1f")
		root := cli.NewProducer()
		if parts[0] == "worker" {
			root = cli.NewWorker()
		}
		os.Exit(cli.Execute(root, parts[1:], os.Stdout, os.Stderr))
	}
	// stack.Main serves ONNX Runtime session children (the in-process
	// workers' candidates run in them) and prints the summary at the end.
	stack.Main(m, stack.MainOptions{After: printSummary})
}
