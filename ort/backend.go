package ort

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// Options configure the backend.
type Options struct {
	// Library is the ONNX Runtime shared library; empty means FindLibrary.
	Library string
	// Command starts a session child; empty means this executable, which
	// must call MaybeServeChild at start.
	Command []string
	// Env is added to the child's environment, which is otherwise the
	// minimal one of internal/childenv (tests pass their stand-in's
	// switches here).
	Env []string
}

// Backend is the ONNX Runtime backend.
type Backend struct {
	opts Options
}

// New returns the backend. It does not load ONNX Runtime: children do.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// Name is "ort".
func (b *Backend) Name() string { return "ort" }

// Validate checks a candidate's options.
func (b *Backend) Validate(c backend.Candidate) error {
	_, err := ParseConfig(c)
	return err
}

// Artifact file names inside the build's work directory.
const (
	EngineFile = "model.optimized.onnx"
	LogFile    = "build.log"
)

// Build starts a session child, creates the session with the candidate's
// options and saves the optimized model as the engine.
func (b *Backend) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	cfg, err := ParseConfig(req.Candidate)
	if err != nil {
		return nil, backend.Fail(backend.FailBuild, "build", err)
	}
	lib, err := FindLibrary(b.opts.Library)
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "build", err)
	}
	command := b.opts.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, backend.Fail(backend.FailInfrastructure, "build", err)
		}
		command = []string{exe}
	}
	if err := os.MkdirAll(req.WorkDir, 0o755); err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "build", err)
	}
	enginePath := filepath.Join(req.WorkDir, EngineFile)
	logPath := filepath.Join(req.WorkDir, LogFile)
	e, err := startChild(command, logPath, append(append(append([]string{}, b.opts.Env...), req.Env...), ChildEnv+"=1"))
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "build", fmt.Errorf("start ONNX Runtime session process: %w", err))
	}
	r := request{
		Op: opBuild, Library: lib, ONNXPath: req.ONNXPath, OptimizedPath: enginePath, Config: cfg,
	}
	for _, in := range req.Graph.Inputs {
		r.InputNames = append(r.InputNames, in.Name)
	}
	for _, out := range req.Graph.Outputs {
		r.OutputNames = append(r.OutputNames, out.Name)
	}
	resp, err := e.call(ctx, r, backend.FailBuild)
	if err != nil {
		e.Close()
		return nil, explainOldOpset(req.ONNXPath, err)
	}
	e.info = resp.Info
	e.artifacts = []backend.Artifact{{Role: "engine", Path: enginePath}, {Role: "log", Path: logPath}}
	return e, nil
}

// explainOldOpset says, when a session failed for want of an operator
// version ONNX Runtime dropped, that the model's opset is too old and how
// to upgrade it; the failure keeps its class.
func explainOldOpset(onnxPath string, err error) error {
	io, rerr := bundle.ReadGraphIO(onnxPath)
	if rerr != nil {
		return err
	}
	explained := io.ExplainOldOpset(err)
	if explained == err {
		return err
	}
	return backend.Fail(backend.ClassOf(err, backend.FailBuild), "build", explained)
}
