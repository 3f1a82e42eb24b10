package backend

import (
	"context"
	"errors"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// BuildRequest is everything a backend needs to build an engine for one
// graph spec.
type BuildRequest struct {
	Model     string         // the bundle's model name
	Graph     bundle.Graph   // the graph spec as the bundle declares it
	ONNXPath  string         // absolute path of the graph's ONNX file
	Profile   shapes.Profile // the optimization profile to build for
	Candidate Candidate
	WorkDir   string // an empty directory the engine's artifacts go in
	// Env is extra environment for the processes the engine starts, e.g.
	// CUDA_VISIBLE_DEVICES pinning a task to one GPU.
	Env []string
}

// OutputSpec says how to allocate one output of a run: its name, dtype and,
// when known in advance, its shape. A nil Shape lets the runtime decide.
type OutputSpec struct {
	Name  string
	DType bundle.DType
	Shape []int64
}

// OutputSpecsLike returns output specs matching reference tensors.
func OutputSpecsLike(refs []bundle.Tensor) []OutputSpec {
	out := make([]OutputSpec, len(refs))
	for i, r := range refs {
		out[i] = OutputSpec{Name: r.Name, DType: r.DType, Shape: r.Shape}
	}
	return out
}

// RoleEngineData is the role of a file the engine reads beside itself: an
// ONNX engine's external data (the optimized model ONNX Runtime writes
// keeps referencing the original model's <model>.onnx.data). Such a file
// travels with the engine (uploaded, in state.json, fetched) under the
// path relative to the engine that the engine names it by.
const RoleEngineData = "engine-data"

// RoleLog is the role of a build's log: what the backend's build and the
// correctness check wrote about the candidate.
const RoleLog = "log"

// Artifact is a file an engine build produced.
type Artifact struct {
	Role string `json:"role"` // "engine", "log", …
	Path string `json:"path"` // absolute while building; relative to the result directory in results
}

// Backend is one engine technology. Implementations live in their own
// packages (ort, trt) and must be safe for concurrent use.
type Backend interface {
	// Name is the prefix of the backend's candidates ("ort", "trt").
	Name() string
	// Validate rejects a candidate this backend cannot express, with a
	// message that says what would be accepted. It does no work.
	Validate(c Candidate) error
	// Build builds an engine. Errors are *Failure values.
	Build(ctx context.Context, req BuildRequest) (Engine, error)
}

// Engine is a built engine that can run samples and be benchmarked.
type Engine interface {
	// Run runs one sample and returns its outputs, in the order of outs.
	Run(ctx context.Context, inputs []bundle.Tensor, outs []OutputSpec) ([]bundle.Tensor, error)
	// Benchmark times repeated runs of one batch under rule.
	Benchmark(ctx context.Context, batchSize int, inputs []bundle.Tensor, outs []OutputSpec, rule StopRule) (Stats, error)
	// Artifacts lists the files the build wrote (the engine first).
	Artifacts() []Artifact
	// Info describes the engine and where it was built (versions, CPU).
	Info() map[string]string
	// Close releases the engine. It is safe to call more than once.
	Close() error
}

// Registry maps backend names to backends.
type Registry map[string]Backend

// Lookup returns the backend of a candidate, or a build failure naming the
// backends available.
func (r Registry) Lookup(c Candidate) (Backend, error) {
	b, ok := r[c.Backend]
	if !ok {
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		return nil, Failf(FailBuild, "resolve", "candidate %q: unknown backend %q (available: %v)", c, c.Backend, names)
	}
	return b, nil
}

// Status of one candidate in a tuning result.
type Status string

// Candidate statuses.
const (
	StatusPassed  Status = "passed"  // built, correct, measured
	StatusFailed  Status = "failed"  // see Failure
	StatusSkipped Status = "skipped" // not tried (e.g. first-wins already had a winner)
)

// FailureInfo is a Failure as recorded in result.json.
type FailureInfo struct {
	Class   FailureClass `json:"class"`
	Op      string       `json:"op,omitempty"`
	Kind    string       `json:"kind,omitempty"` // a backend's finer label, e.g. trt "build-oom"
	Message string       `json:"message"`
}

// Kinder is implemented by backend errors that carry a finer failure kind
// than the class (trtexec's classifier: "build-oom", "plugin-not-found").
type Kinder interface{ FailureKind() string }

// InfoOf converts an error into its recorded form.
func InfoOf(err error, fallback FailureClass) *FailureInfo {
	if err == nil {
		return nil
	}
	fi := &FailureInfo{Class: ClassOf(err, fallback), Message: err.Error()}
	var f *Failure
	if asFailure(err, &f) {
		fi.Op = f.Op
	}
	var k Kinder
	if errors.As(err, &k) {
		fi.Kind = k.FailureKind()
	}
	return fi
}

// CandidateResult is the outcome of one candidate on one graph spec.
type CandidateResult struct {
	Candidate  string            `json:"candidate"`
	Status     Status            `json:"status"`
	Failure    *FailureInfo      `json:"failure,omitempty"`
	BuildTime  time.Duration     `json:"build_ns,omitempty"`
	CheckedAt  int               `json:"samples_checked,omitempty"`
	Benchmarks []Stats           `json:"benchmarks,omitempty"`
	Artifacts  []FileRef         `json:"artifacts,omitempty"`
	Info       map[string]string `json:"info,omitempty"`
	// SkipReason is set when the candidate was not built at all because
	// its outcome is known: it failed deterministically on the same work
	// on the same platform and toolchain before (the worker's negative
	// cache). Status and Failure are the recorded ones; this says so.
	SkipReason string `json:"skip_reason,omitempty"`
	// SameEngineAs names the candidate whose engine this one's is,
	// byte for byte (and run with the same settings): it was measured
	// once, by that candidate, and Benchmarks are its figures.
	SameEngineAs string `json:"same_engine_as,omitempty"`
}

// FileRef names a file with its digest.
type FileRef struct {
	Role   string `json:"role,omitempty"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Passed reports whether the candidate built, passed the correctness check
// and was measured.
func (r CandidateResult) Passed() bool { return r.Status == StatusPassed }

// BestThroughput returns the benchmark with the highest throughput; ties go
// to the smaller batch size (the earlier one in the sweep). ok is false when
// nothing was measured.
func (r CandidateResult) BestThroughput(maxLatencyMs float64) (Stats, bool) {
	var best Stats
	ok := false
	for _, s := range r.Benchmarks {
		if maxLatencyMs > 0 && s.MeanMs > maxLatencyMs {
			continue
		}
		if !ok || s.Throughput > best.Throughput {
			best, ok = s, true
		}
	}
	return best, ok
}

// AtBatch returns the benchmark of one batch size.
func (r CandidateResult) AtBatch(bs int) (Stats, bool) {
	for _, s := range r.Benchmarks {
		if s.BatchSize == bs {
			return s, true
		}
	}
	return Stats{}, false
}

// RunKeyer is implemented by engines whose speed depends on settings that
// are not in the engine file (ONNX Runtime's thread counts): two
// candidates are the same engine when their engine files are
// byte-identical and their RunKeys are equal. An engine that does not
// implement it is identified by its engine file alone.
type RunKeyer interface{ RunKey() string }
