package stack

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/ort"
)

// The roles a process of the test binary plays, named by its environment.
const (
	// WorkerEnv carries a worker process's arguments (separated by \x1f).
	WorkerEnv = "TUNEFLEET_STACK_WORKER"
	// producerEnv carries a producer command's arguments.
	producerEnv = "TUNEFLEET_STACK_PRODUCER"
	// WorkerTRTEnv names the trtexec stand-in's config for a worker: the
	// worker hands it on to its children as trtreplay.Env, so that they,
	// not the worker itself, act as trtexec.
	WorkerTRTEnv = "TUNEFLEET_STACK_WORKER_TRTREPLAY"
	// CrashORTEnv names a marker file: the first ONNX Runtime session child
	// of a worker with this in its environment creates it and dies by
	// SIGSEGV, as a crashing ONNX Runtime kernel would; later children find
	// the file and serve normally. One candidate crashes, the rest run.
	CrashORTEnv = "TUNEFLEET_STACK_CRASH_ORT_ONCE"
)

// MainOptions configures Main.
type MainOptions struct {
	// MinParallel raises -test.parallel to at least this unless the
	// command line set it: tests that mostly wait (for a lease to expire, a
	// server to come back) should not queue behind GOMAXPROCS, which is 2
	// on CI.
	MinParallel int
	// After runs after the tests (e.g. to print a summary).
	After func()
}

// Main is the body of a TestMain of a package that uses stacks: it serves
// the role this process was started in (worker, producer, trtexec
// stand-in, ONNX Runtime session child) or runs the tests, then exits.
func Main(m *testing.M, opts MainOptions) {
	// A worker's children inherit its environment (workerEnv and all), so
	// the most specific role goes first: a session child, then the trtexec
	// stand-in, then worker and producer.
	if os.Getenv(ort.ChildEnv) != "" {
		if marker := os.Getenv(CrashORTEnv); marker != "" {
			if f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				syscall.Kill(os.Getpid(), syscall.SIGSEGV)
				select {}
			}
		}
		ort.MaybeServeChild() // never returns
	} else {
		if cfg := os.Getenv(trtreplay.Env); cfg != "" {
			// The trtexec stand-in (a fixture-log replayer, never TensorRT).
			os.Exit(trtreplay.Main(cfg, os.Args[1:]))
		}
		if args := os.Getenv(WorkerEnv); args != "" {
			if cfg := os.Getenv(WorkerTRTEnv); cfg != "" {
				os.Setenv(trtreplay.Env, cfg)
			}
			os.Exit(cli.Execute(cli.NewWorker(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
		}
		if args := os.Getenv(producerEnv); args != "" {
			code := cli.Execute(cli.NewProducer(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr)
			reportPeakRSS()
			os.Exit(code)
		}
	}
	// Only the test role parses the command line: a stand-in's (trtexec
	// --help) is not the test binary's.
	if opts.MinParallel > 0 {
		minParallel(opts.MinParallel)
	}
	code := orttest.Run(m)
	if opts.After != nil {
		opts.After()
	}
	os.Exit(code)
}

// minParallel raises -test.parallel to at least n unless the command
// line set it.
func minParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !set {
		if cur, _ := strconv.Atoi(p.Value.String()); cur < n {
			p.Value.Set(strconv.Itoa(n))
		}
	}
}
