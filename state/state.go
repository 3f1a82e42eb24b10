package state

import (
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
)

// StateFormat is the version of state.json.
const StateFormat = "tunefleet.state/v1"

// State is state.json: the module state of a run, in a language-neutral
// form that deploy tooling (and a Go or C++ runtime) reads.
type State struct {
	Format     string       `json:"format"`
	Model      string       `json:"model"`
	Platform   string       `json:"platform"` // the platform key all its engines are valid on
	Target     string       `json:"target"`   // the target class it was submitted for
	Run        string       `json:"run"`
	Status     string       `json:"status"` // done | failed
	Reasons    []string     `json:"reasons,omitempty"`
	Graphs     []StateGraph `json:"graphs"`
	AITune     *Checkpoint  `json:"aitune,omitempty"`
	Provenance Provenance   `json:"provenance"`
}

// StateGraph is one graph spec of the module state.
type StateGraph struct {
	Name       string              `json:"name"`
	Inputs     []bundle.TensorDecl `json:"inputs"`
	Outputs    []bundle.TensorDecl `json:"outputs"`
	Profile    shapes.Profile      `json:"profile"`
	Candidate  string              `json:"candidate,omitempty"`
	Selection  *strategy.Selection `json:"selection,omitempty"`
	Engine     *EngineRef          `json:"engine,omitempty"`
	Benchmarks []backend.Stats     `json:"benchmarks,omitempty"`
	Info       map[string]string   `json:"info,omitempty"`
	// Requires is what a machine needs to run Engine, when the engine is
	// tied to the hardware that built it (Requires.CanRun); nil when it
	// runs on any machine of the platform's kind.
	Requires  *Requires            `json:"requires,omitempty"`
	Failure   *backend.FailureInfo `json:"failure,omitempty"`
	ResultKey string               `json:"result_key"`
	Worker    string               `json:"worker,omitempty"`
}

// EngineRef locates an engine blob.
type EngineRef struct {
	Key    string `json:"key"`
	File   string `json:"file"` // the engine's file name
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Data are the files the engine reads beside itself (an ONNX engine's
	// external data), each fetched to File relative to the engine's
	// directory.
	Data []EngineDataRef `json:"data,omitempty"`
}

// EngineDataRef locates a file an engine reads beside itself.
type EngineDataRef struct {
	Key    string `json:"key"`
	File   string `json:"file"` // slash-separated, relative to the engine's directory, as the engine names it
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Provenance records where a state came from.
type Provenance struct {
	Tunefleet       string    `json:"tunefleet"`
	Go              string    `json:"go"`
	BundleDigest    string    `json:"bundle_digest"`
	Target          string    `json:"target"`
	Strategy        string    `json:"strategy"`
	LatencyBudgetMs float64   `json:"latency_budget_ms,omitempty"`
	Candidates      []string  `json:"candidates"`
	Command         []string  `json:"command,omitempty"`
	SubmittedBy     string    `json:"submitted_by"`
	SubmittedAt     time.Time `json:"submitted_at"`
	FinalizedAt     time.Time `json:"finalized_at"`
	Workers         []string  `json:"workers,omitempty"`
}

// Latest is models/<model>/<platform>/latest.json.
type Latest struct {
	Format      string    `json:"format"`
	Model       string    `json:"model"`
	Platform    string    `json:"platform"`
	Run         string    `json:"run"`
	StateKey    string    `json:"state_key"`
	StateSHA256 string    `json:"state_sha256"`
	SubmittedAt time.Time `json:"submitted_at"`
	// Sequence goes up by one each time the pointer moves; MovedAt is
	// when it last did. The signed pointer beside it (latest.intoto.jsonl,
	// when finalize signs) says the same, for deploy tooling to refuse a
	// pointer rolled back to an older run.
	Sequence int64     `json:"sequence,omitempty"`
	MovedAt  time.Time `json:"moved_at,omitzero"`
	// Work is the run's work id (run.json's work): a nightly whose entry
	// has the same work id carries this run forward instead of making a
	// run of its own. Empty in pointers moved before it was recorded.
	Work string `json:"work,omitempty"`
	// RunPlatform is the platform the run ran on, in a pointer filed under
	// a target class (Platform is then the class); empty under the
	// platform's own key.
	RunPlatform string `json:"run_platform,omitempty"`
}

// RanOn is the platform the pointer's run ran on.
func (l Latest) RanOn() string {
	if l.RunPlatform != "" {
		return l.RunPlatform
	}
	return l.Platform
}

// LatestFormat is the version of latest.json.
const LatestFormat = "tunefleet.latest/v1"

// Checkpoint is the AITune-native checkpoint of a run, written when its
// bundle carried an aitune block: files under Prefix that ait.load reads
// from a folder (Name/, Name.ait and the sums file).
type Checkpoint struct {
	Name    string           `json:"name,omitempty"` // ait.load(module, Name, …)
	Prefix  string           `json:"prefix,omitempty"`
	Archive string           `json:"archive,omitempty"`
	Files   []CheckpointFile `json:"files,omitempty"`
	// Unmeasured lists the graphs whose winner was measured on a provider
	// AITune's backend cannot use (ONNX Runtime on the CPU: AITune's
	// ONNXRuntimeBackend runs only the CUDA and TensorRT providers), so
	// the checkpoint deploys them on one that was never measured.
	Unmeasured []UnmeasuredGraph `json:"unmeasured,omitempty"`
	// Skipped says why no checkpoint was written although the bundle has
	// an aitune block: it asked for checkpoints from GPU-class winners
	// only, and a winner is a CPU one.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"` // why it could not be written
}

// UnmeasuredGraph is a graph a checkpoint deploys on a provider its
// winner was not measured on.
type UnmeasuredGraph struct {
	Graph     string `json:"graph"`
	Candidate string `json:"candidate"`  // the winner as measured, e.g. ort:cpu:extended
	DeploysOn string `json:"deploys_on"` // what AITune runs it on instead
}

// CheckpointFile is one file of a checkpoint, relative to its folder.
type CheckpointFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}
