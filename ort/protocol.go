package ort

import (
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// The parent and its session child exchange gob-encoded request/response
// pairs over the child's stdin and stdout, one at a time.

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
	Inputs    []bundle.Tensor
	Outs      []backend.OutputSpec
	BatchSize int
	Rule      backend.StopRule
}

type response struct {
	Err      string
	ErrClass backend.FailureClass
	Outputs  []bundle.Tensor
	Stats    backend.Stats
	Info     map[string]string
}
