package tuner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
)

// ResultFormat is the version of result.json.
const ResultFormat = "tunefleet.result/v1"

// ResultFile is the name of a graph's result in its output directory.
const ResultFile = "result.json"

// Result is result.json: everything about the tuning of one graph spec.
type Result struct {
	Format          string              `json:"format"`
	Model           string              `json:"model"`
	Graph           string              `json:"graph"`
	BundleDigest    string              `json:"bundle_digest"`
	Inputs          []bundle.FileDigest `json:"inputs"` // the graph's files in the bundle
	Strategy        string              `json:"strategy"`
	LatencyBudgetMs float64             `json:"latency_budget_ms,omitempty"`
	Candidates      []string            `json:"candidates"`
	Profile         shapes.Profile      `json:"profile"`
	BatchSizes      []int               `json:"batch_sizes"`
	// NoSweep says why BatchSizes is empty (every candidate was measured
	// once, on the recorded sample at its own batch): no input has a
	// batch axis, or the largest batch they allow is 1. Empty when swept.
	NoSweep string `json:"no_sweep,omitempty"`
	// FoundMaxBatch is the batch of the highest throughput that the
	// find-max-batch-size step found (Options.FindMaxBatch); the graph's
	// inputs were extended to it where it is above their max, and Profile
	// and BatchSizes follow. Zero when the step did not run.
	FoundMaxBatch int              `json:"found_max_batch,omitempty"`
	FindMaxBatch  *maxbatch.Report `json:"find_max_batch,omitempty"`
	StopRule      backend.StopRule `json:"stop_rule"`
	// Seed ordered the interleaved rounds of the measurement (each batch
	// size's rounds use seed + its place in the sweep).
	Seed uint64 `json:"seed,omitempty"`
	// IdenticalEngines are groups of candidates whose engines are
	// byte-identical (and run with the same settings): each group was
	// measured once, by its first candidate, and shares the figures.
	IdenticalEngines [][]string                `json:"identical_engines,omitempty"`
	Results          []backend.CandidateResult `json:"results"`
	Winner           *Winner                   `json:"winner,omitempty"`
	Failure          *backend.FailureInfo      `json:"failure,omitempty"`
	Worker           string                    `json:"worker,omitempty"`   // who tuned it (queue mode)
	Platform         string                    `json:"platform,omitempty"` // where its engines and timings are valid
	Reused           bool                      `json:"reused,omitempty"`   // taken from the result index, not rebuilt
	// Requires is what a machine needs to run the winner's engine (its
	// hardware-specific operators, a TensorRT plan's GPU), recorded with
	// the result so that a reuse of it carries it: {} when any machine of
	// the platform's kind can; absent on results from before it was kept
	// (the worker derives it from the engine then).
	Requires *state.Requires `json:"requires,omitempty"`
	// Run is the run this result belongs to (queue mode). ReusedFrom, on
	// a reused result, is the run whose measurement it is: the index
	// keeps the measuring run's result, so a reuse of a reuse still names
	// the run that measured. Empty for results indexed before it was kept.
	Run        string        `json:"run,omitempty"`
	ReusedFrom string        `json:"reused_from,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
	Duration   time.Duration `json:"duration_ns"`
}

// Winner is the selected candidate and its engine.
type Winner struct {
	strategy.Selection
	Engine *backend.FileRef `json:"engine,omitempty"`
	// EngineData are the files the engine reads beside itself (role
	// backend.RoleEngineData), e.g. an ONNX engine's external data.
	EngineData []backend.FileRef `json:"engine_data,omitempty"`
}

// MarkReused makes an indexed result the result of run: reused, and
// naming the run that measured it.
func (r *Result) MarkReused(run string) {
	if r.ReusedFrom == "" && !r.Reused {
		r.ReusedFrom = r.Run
	}
	r.Reused, r.Run = true, run
}

// Speedup is the winner's speedup over its baseline, nil without one.
func (r *Result) Speedup() *strategy.Speedup {
	if r == nil || r.Winner == nil {
		return nil
	}
	return r.Winner.Speedup
}

// OK reports whether the graph has a winner.
func (r *Result) OK() bool { return r.Winner != nil }

// ReadResult reads a result.json.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Format != ResultFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, r.Format, ResultFormat)
	}
	return &r, nil
}

// writeJSON writes v to path atomically (temp file + rename), so a reader
// never sees a half-written result.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
