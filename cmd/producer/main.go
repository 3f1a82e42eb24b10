// Command producer makes recording bundles and submits them for tuning.
package main

import (
	"os"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/ort"
)

func main() {
	ort.MaybeServeChild() // this binary is also its own ONNX Runtime session child
	os.Exit(cli.Execute(cli.NewProducer(), os.Args[1:], os.Stdout, os.Stderr))
}
