package ort

import (
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// The parent and its session child exchange gob-encoded request/response
// pairs over the child's stdin and stdout, one at a time. A benchmark
// request with Progress set may be answered by partial responses (Partial,
// with the timed calls so far) before its final one.

type op string

const (
	opBuild op = "build"
	opRun   op = "run"
	opBench op = "bench"
	opClose op = "close"
)

type request struct {
	Op op
	// build
	Library       string
	ONNXPath      string
	OptimizedPath string
	Config        Config
	InputNames    []string
	OutputNames   []string
	// run, bench
	Inputs []bundle.Tensor
	Outs   []backend.OutputSpec
	// OutRank0 marks outputs whose known shape is rank 0: gob sends an
	// empty slice as nil, which would read as "shape unknown".
	OutRank0  []bool
	BatchSize int
	Rule      backend.StopRule
	// Progress asks for partial responses while a benchmark runs.
	Progress bool
}

type response struct {
	Err      string
	ErrClass backend.FailureClass
	Outputs  []bundle.Tensor
	Stats    backend.Stats
	Info     map[string]string
	// Partial marks a progress report: Calls timed calls so far; the
	// final response follows.
	Partial bool
	Calls   int
}

// encodeOuts prepares output specs for the wire.
func encodeOuts(outs []backend.OutputSpec) []bool {
	r0 := make([]bool, len(outs))
	for i, o := range outs {
		r0[i] = o.Shape != nil && len(o.Shape) == 0
	}
	return r0
}

// decodeOuts restores rank-0 shapes after the wire.
func decodeOuts(outs []backend.OutputSpec, r0 []bool) {
	for i := range outs {
		if i < len(r0) && r0[i] {
			outs[i].Shape = []int64{}
		}
	}
}
