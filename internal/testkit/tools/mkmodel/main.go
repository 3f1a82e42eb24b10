// Command mkmodel writes one of the fixture ONNX models of
// internal/testkit/onnxtest, for the demo and for trying tunefleet without a model
// of one's own.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

func main() {
	model := flag.String("model", "mlp", "mlp, convnet or two-inputs")
	out := flag.String("o", "", "output .onnx file")
	flag.Parse()
	models := map[string]func() *onnxtest.Builder{
		"mlp":        func() *onnxtest.Builder { return onnxtest.MLP(64, 256, 10) },
		"convnet":    onnxtest.ConvNet,
		"two-inputs": onnxtest.TwoInputs,
	}
	mk, ok := models[*model]
	if !ok || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: mkmodel -model mlp|convnet|two-inputs -o FILE.onnx")
		os.Exit(2)
	}
	if err := mk().Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}
