// Command worker builds, checks, benchmarks and selects inference engines.
package main

import (
	"os"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/ort"
)

func main() {
	ort.MaybeServeChild() // this binary is also its own ONNX Runtime session child
	os.Exit(cli.Execute(cli.NewWorker(), os.Args[1:], os.Stdout, os.Stderr))
}
