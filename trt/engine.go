package trt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// Engine is a built TensorRT plan in its work directory. Every Run and
// Benchmark is one trtexec process that loads the plan: nothing stays
// resident between calls, so there is nothing to leak and nothing a crash
// can take with it.
type Engine struct {
	b        *Backend
	v        Version
	cfg      Config
	dir      string
	env      []string // the build request's (e.g. the pinned GPU)
	buildLog *Log
	info     map[string]string

	mu        sync.Mutex
	calls     int
	artifacts []backend.Artifact
	closed    bool
}

// Version is the TensorRT version that built the engine.
func (e *Engine) Version() Version { return e.v }

// Config is the candidate the engine was built for.
func (e *Engine) Config() Config { return e.cfg }

// BuildLog is the parsed build log (device, milestones, warnings).
func (e *Engine) BuildLog() *Log { return e.buildLog }

// next reserves a call number, so concurrent calls get their own files.
func (e *Engine) next() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, fmt.Errorf("engine is closed")
	}
	e.calls++
	return e.calls, nil
}

func (e *Engine) addArtifact(a backend.Artifact) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.artifacts = append(e.artifacts, a)
}

// Run runs one sample: the inputs go in as raw files through --loadInputs,
// the outputs come back through --exportOutput and are returned in the
// order of outs, converted to their dtypes. A failed run keeps its log as
// an artifact; a successful one leaves nothing behind.
func (e *Engine) Run(ctx context.Context, inputs []bundle.Tensor, outs []backend.OutputSpec) ([]bundle.Tensor, error) {
	n, err := e.next()
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "run", err)
	}
	sub := fmt.Sprintf("run-%d", n)
	defer os.RemoveAll(filepath.Join(e.dir, sub))
	files, err := writeInputs(e.dir, sub, inputs)
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "run", fmt.Errorf("write inputs: %w", err))
	}
	outFile := sub + "/outputs.json"
	args, err := RunArgs(e.v, RunSpec{Engine: EngineFile, Inputs: files, ExportOutput: outFile, Verbose: e.b.opts.Verbose})
	if err != nil {
		return nil, backend.Fail(backend.FailRuntime, "run", err)
	}
	logName := sub + ".log"
	logPath := filepath.Join(e.dir, logName)
	keepLog := func() { e.addArtifact(backend.Artifact{Role: RoleRunLog, Path: logPath}) }
	l, err := e.b.invoke(ctx, StageRun, "run", e.dir, logName, args, e.env)
	if err != nil {
		keepLog()
		return nil, err
	}
	if err := checkLoaded(l, inputs); err != nil {
		keepLog()
		return nil, backend.Fail(backend.FailRuntime, "run", err)
	}
	exported, err := ReadOutputs(filepath.Join(e.dir, filepath.FromSlash(outFile)))
	if err != nil {
		keepLog()
		return nil, backend.Fail(backend.FailRuntime, "run", fmt.Errorf("trtexec PASSED but its exported outputs are unreadable: %w", err))
	}
	got, err := OutputsFor(exported, outs)
	if err != nil {
		keepLog()
		return nil, backend.Fail(backend.FailRuntime, "run", err)
	}
	os.Remove(logPath)
	return got, nil
}

// checkLoaded makes sure trtexec used the data it was given: an input it
// filled with random values would make the check compare noise.
func checkLoaded(l *Log, inputs []bundle.Tensor) error {
	for _, name := range l.RandomInputs {
		for _, in := range inputs {
			if in.Name == name {
				return fmt.Errorf("trtexec used random values for input %q instead of the --loadInputs file", name)
			}
		}
	}
	return nil
}

// Benchmark times one batch: trtexec runs at least rule.MinSamples queries
// for rule.MaxTime with NVIDIA's stable settings and exports every query's
// time; the stop rule is applied to that trace (ApplyStopRule), so the
// statistics mean what they mean for other backends. Throughput is
// samples per second (batch size / mean latency), not trtexec's queries
// per second. The benchmark log is kept as an artifact.
func (e *Engine) Benchmark(ctx context.Context, bs int, inputs []bundle.Tensor, outs []backend.OutputSpec, rule backend.StopRule) (backend.Stats, error) {
	if err := rule.Validate(); err != nil {
		return backend.Stats{}, backend.Fail(backend.FailRuntime, "bench", err)
	}
	watch := e.b.opts.Telemetry
	for attempt := 0; ; attempt++ {
		var stop func() (string, []string)
		var note []string
		if watch != nil {
			var err error
			if stop, err = watch(ctx, e.env); err != nil {
				stop, note = nil, []string{"telemetry unavailable: " + err.Error()}
			}
		}
		st, err := e.benchOnce(ctx, bs, inputs, rule)
		verdict, problems := "", note
		if stop != nil {
			verdict, problems = stop()
		}
		if err != nil {
			return backend.Stats{}, err
		}
		st.Telemetry, st.TelemetryProblems = verdict, problems
		switch verdict {
		case TelemetryReject:
			// Errors on the device (ECC, Xid, a lost GPU): the figures are
			// not this engine's, and the machine needs a look.
			return backend.Stats{}, backend.Failf(backend.FailInfrastructure, "bench",
				"the GPU reported errors while batch %d was measured: %s", bs, strings.Join(problems, "; "))
		case TelemetryRerun:
			// Throttled: measure again, up to the limit; the last figures
			// stay marked if it never ran clean.
			if attempt < e.b.reruns() {
				continue
			}
		}
		return st, nil
	}
}

// Verdicts a telemetry hook reports (gpu.Verdict's values).
const (
	TelemetryOK     = "ok"
	TelemetryRerun  = "rerun"
	TelemetryReject = "reject"
)

// benchOnce runs one timed trtexec invocation.
func (e *Engine) benchOnce(ctx context.Context, bs int, inputs []bundle.Tensor, rule backend.StopRule) (backend.Stats, error) {
	n, err := e.next()
	if err != nil {
		return backend.Stats{}, backend.Fail(backend.FailInfrastructure, "bench", err)
	}
	sub := fmt.Sprintf("bench-%d-bs%d", n, bs)
	defer os.RemoveAll(filepath.Join(e.dir, sub))
	files, err := writeInputs(e.dir, sub, inputs)
	if err != nil {
		return backend.Stats{}, backend.Fail(backend.FailInfrastructure, "bench", fmt.Errorf("write inputs: %w", err))
	}
	timesFile := sub + "/times.json"
	args, err := BenchArgs(e.v, BenchSpec{Engine: EngineFile, Inputs: files, ExportTimes: timesFile, Rule: rule, Verbose: e.b.opts.Verbose})
	if err != nil {
		return backend.Stats{}, backend.Fail(backend.FailRuntime, "bench", err)
	}
	logName := sub + ".log"
	e.addArtifact(backend.Artifact{Role: RoleBenchmarkLog, Path: filepath.Join(e.dir, logName)})
	l, err := e.b.invoke(ctx, StageBenchmark, "bench", e.dir, logName, args, e.env)
	if err != nil {
		return backend.Stats{}, err
	}
	if err := checkLoaded(l, inputs); err != nil {
		return backend.Stats{}, backend.Fail(backend.FailRuntime, "bench", err)
	}
	recs, err := ReadTimes(filepath.Join(e.dir, filepath.FromSlash(timesFile)))
	if err != nil {
		return backend.Stats{}, backend.Fail(backend.FailRuntime, "bench", fmt.Errorf("trtexec PASSED but its exported times are unreadable: %w", err))
	}
	durs, err := Latencies(recs)
	if err != nil {
		return backend.Stats{}, backend.Fail(backend.FailRuntime, "bench", err)
	}
	if len(durs) == 0 {
		return backend.Stats{}, backend.Failf(backend.FailRuntime, "bench", "trtexec exported no timed queries (log: %s)", logName)
	}
	return ApplyStopRule(bs, durs, rule), nil
}

// Artifacts lists the engine, the build log, the layer information, and
// the logs of benchmarks and failed runs.
func (e *Engine) Artifacts() []backend.Artifact {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.artifacts)
}

// Info describes the engine: TensorRT version, device, config, timing
// cache use.
func (e *Engine) Info() map[string]string {
	out := make(map[string]string, len(e.info))
	for k, v := range e.info {
		out[k] = v
	}
	return out
}

// Close marks the engine closed. No process outlives a call.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}

var _ backend.Backend = (*Backend)(nil)
var _ backend.Engine = (*Engine)(nil)

// MeasuresOnce: every Benchmark starts trtexec and loads the engine, so a
// measurement is one invocation rather than interleaved rounds
// (backend.OneShot).
func (e *Engine) MeasuresOnce() bool { return true }
