package ort

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/internal/fsutil"
	"github.com/tunefleet/tunefleet/state"
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
	e.logf("build candidate %s of graph %s", req.Candidate, req.Graph.Name)
	e.logf("session options: graph optimization %s, intra-op threads %d, inter-op threads %d, spinning %t; ONNX Runtime %s",
		cfg.Level, cfg.IntraThreads, cfg.InterThreads, cfg.Spinning, lib)
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
		e.logf("build failed: %v", err)
		e.Close()
		return nil, explainOldOpset(req.ONNXPath, err)
	}
	e.info = resp.Info
	if fi, err := os.Stat(enginePath); err == nil {
		e.logf("optimized model %s (%d bytes), ONNX Runtime %s", enginePath, fi.Size(), resp.Info["ort_version"])
	} else {
		e.logf("optimized model %s not written: %v", enginePath, err)
	}
	e.artifacts = []backend.Artifact{{Role: "engine", Path: enginePath}, {Role: "log", Path: logPath}}
	gio, err := bundle.ReadGraphIO(enginePath)
	if err != nil {
		e.Close()
		return nil, backend.Fail(backend.FailBuild, "build", fmt.Errorf("read the optimized model ONNX Runtime wrote: %w", err))
	}
	data, err := placeEngineData(req.ONNXPath, enginePath, gio)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.artifacts = append(e.artifacts, data...)
	if ops := hardwareOps(gio); len(ops) > 0 {
		e.info = recordHardware(e.info, ops)
		e.logf("the optimized model uses %s (hardware-specific): it runs where ONNX Runtime's NCHWc block is %s, as here", strings.Join(ops, ", "), e.info[InfoNCHWcBlock])
	}
	return e, nil
}

// Info keys of an engine whose optimized model is tied to the CPU that
// built it: the hardware-specific operator domains it uses (comma
// separated) and the NCHWc channel block of this machine's CPU.
const (
	InfoHardwareOps = "hardware_ops"
	InfoNCHWcBlock  = "nchwc_block"
)

// hardwareOps are the operator domains of the optimized model that tie
// it to the CPU that optimized it (ONNX Runtime warns that such a model
// "may contain hardware specific optimizations").
func hardwareOps(gio bundle.GraphIO) []string {
	if gio.NodeDomains[state.NCHWcDomain] > 0 {
		return []string{state.NCHWcDomain}
	}
	return nil
}

// recordHardware adds the hardware-specific operators and the NCHWc block
// of this machine (where ONNX Runtime optimized the model) to info. A CPU
// that cannot be read leaves the block out: finalize then requires the
// architecture alone, and says the block is unknown.
func recordHardware(info map[string]string, ops []string) map[string]string {
	out := maps.Clone(info)
	if out == nil {
		out = map[string]string{}
	}
	out[InfoHardwareOps] = strings.Join(ops, ",")
	if cpu, err := gpu.DetectCPU(""); err == nil {
		if b := state.NCHWcBlock(runtime.GOARCH, cpu.Flags); b > 0 {
			out[InfoNCHWcBlock] = strconv.Itoa(b)
		}
	}
	return out
}

// placeEngineData puts the external data files the optimized model names
// beside it, where ONNX Runtime looks for them (relative to the model
// file), and returns them as engine-data artifacts. ONNX Runtime writes
// the optimized model with the original model's external-data references
// (location, offset, length) unchanged, so the files are the original's:
// hard-linked where the file system allows, else copied. Without them the
// engine does not load anywhere else ("cannot get file size").
func placeEngineData(onnxPath, enginePath string, gio bundle.GraphIO) ([]backend.Artifact, error) {
	var out []backend.Artifact
	for _, loc := range gio.ExternalData {
		if loc == "" || path.IsAbs(loc) || filepath.IsAbs(loc) || slices.Contains(strings.Split(path.Clean(loc), "/"), "..") || strings.ContainsAny(loc, "\\\x00") {
			return nil, backend.Fail(backend.FailBuild, "build", fmt.Errorf("the optimized model keeps external data at %q, which is not a path inside its folder", loc))
		}
		src := filepath.Join(filepath.Dir(onnxPath), filepath.FromSlash(loc))
		dst := filepath.Join(filepath.Dir(enginePath), filepath.FromSlash(loc))
		if err := linkOrCopy(src, dst); err != nil {
			return nil, backend.Fail(backend.FailBuild, "build", fmt.Errorf("external data %q of the optimized model: %w", loc, err))
		}
		out = append(out, backend.Artifact{Role: backend.RoleEngineData, Path: dst})
	}
	return out, nil
}

// linkOrCopy makes dst a copy of src (a hard link when it can).
func linkOrCopy(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		return nil // placed by an earlier build in the same folder
	}
	return fsutil.LinkOrCopy(src, dst)
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
