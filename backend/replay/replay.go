package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// EngineFormat is the format of the engine file a replay build writes.
const EngineFormat = "tunefleet.replay/v1"

// Wrap returns a registry with the same names whose backends validate
// candidates as the real ones do and build replay engines.
func Wrap(reg backend.Registry, c Config) backend.Registry {
	out := make(backend.Registry, len(reg))
	for name, real := range reg {
		out[name] = &Backend{real: real, c: c}
	}
	return out
}

// Backend is the replay backend standing in for one real backend.
type Backend struct {
	real backend.Backend
	c    Config
}

// Name is the real backend's: its candidates are what the fleet submits.
func (b *Backend) Name() string { return b.real.Name() }

// Validate accepts what the real backend accepts.
func (b *Backend) Validate(c backend.Candidate) error { return b.real.Validate(c) }

// record is the engine file's content: what was replayed.
type record struct {
	Format      string        `json:"format"`
	Model       string        `json:"model"`
	Graph       string        `json:"graph"`
	Candidate   string        `json:"candidate"`
	ONNXSHA256  string        `json:"onnx_sha256"`
	Simulated   time.Duration `json:"simulated_ns"`
	Slept       time.Duration `json:"slept_ns"`
	Scale       float64       `json:"scale"`
	Seed        uint64        `json:"seed"`
	LatencyNs   time.Duration `json:"latency_ns"`
	HistoryFile string        `json:"history,omitempty"`
}

// Build sleeps the graph's compressed build time, then writes the engine
// file and the build log into req.WorkDir.
func (b *Backend) Build(ctx context.Context, req backend.BuildRequest) (backend.Engine, error) {
	cand := req.Candidate.String()
	sum, err := fileSHA256(req.ONNXPath)
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "read graph", err)
	}
	sim := b.c.Simulated(req.Model, req.Graph.Name, cand)
	sleep := b.c.Compressed(sim)
	t := time.NewTimer(sleep)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return nil, backend.Fail(backend.FailTimeout, "replay build", ctx.Err())
	}
	rec := record{Format: EngineFormat, Model: req.Model, Graph: req.Graph.Name, Candidate: cand, ONNXSHA256: sum,
		Simulated: sim, Slept: sleep, Scale: b.c.Scale, Seed: b.c.Seed, LatencyNs: b.c.Latency, HistoryFile: b.c.History}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "write engine", err)
	}
	// The work directory may not exist yet: a backend makes its own, as
	// ort's does.
	if err := os.MkdirAll(req.WorkDir, 0o755); err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "write engine", err)
	}
	enginePath := filepath.Join(req.WorkDir, "model.replay.json")
	logPath := filepath.Join(req.WorkDir, "build.log")
	if err := os.WriteFile(enginePath, append(raw, '\n'), 0o644); err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "write engine", err)
	}
	msg := fmt.Sprintf("replay: simulated build of %s (no engine was built): %v simulated, slept %v (scale %g)\n", cand, sim, sleep, b.c.Scale)
	if err := os.WriteFile(logPath, []byte(msg), 0o644); err != nil {
		return nil, backend.Fail(backend.FailInfrastructure, "write log", err)
	}
	return &Engine{c: b.c, sim: sim, arts: []backend.Artifact{{Role: "engine", Path: enginePath}, {Role: backend.RoleLog, Path: logPath}}}, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Engine is a replay engine: the identity function, with calls that sleep
// the simulated latency.
type Engine struct {
	c    Config
	sim  time.Duration
	arts []backend.Artifact
}

// Run returns each input as the output of the same position, under the
// output's name: the identity. A graph that computes anything else fails
// the correctness check on it.
func (e *Engine) Run(ctx context.Context, inputs []bundle.Tensor, outs []backend.OutputSpec) ([]bundle.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, backend.Fail(backend.FailRuntime, "replay run", err)
	}
	if len(inputs) != len(outs) {
		return nil, backend.Failf(backend.FailRuntime, "replay run", "the replay engine computes the identity: %d inputs cannot give %d outputs", len(inputs), len(outs))
	}
	got := make([]bundle.Tensor, len(outs))
	for i, in := range inputs {
		got[i] = in
		got[i].Name = outs[i].Name
	}
	return got, nil
}

// Benchmark measures calls that sleep the latency per sample of the batch,
// under rule.
func (e *Engine) Benchmark(ctx context.Context, batchSize int, inputs []bundle.Tensor, outs []backend.OutputSpec, rule backend.StopRule) (backend.Stats, error) {
	per := e.c.Latency * time.Duration(max(batchSize, 1))
	return backend.Measure(ctx, rule, batchSize, func() (time.Duration, error) {
		start := time.Now()
		time.Sleep(per)
		return time.Since(start), nil
	})
}

// Artifacts are the engine file, then the build log.
func (e *Engine) Artifacts() []backend.Artifact { return e.arts }

// Info says the engine is a replay, with what it replayed.
func (e *Engine) Info() map[string]string {
	return map[string]string{"backend": "replay", "replay_simulated": e.sim.String(), "replay_scale": strconv.FormatFloat(e.c.Scale, 'g', -1, 64)}
}

// Close does nothing: a replay engine holds nothing.
func (e *Engine) Close() error { return nil }
