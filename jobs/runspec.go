package jobs

import (
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// RunFormat is the version of run.json.
const RunFormat = "tunefleet.run/v1"

// RunSpec is run.json: the submission, as workers and finalize read it.
type RunSpec struct {
	Format          string                   `json:"format"`
	Run             string                   `json:"run"`
	Model           string                   `json:"model"`
	Target          string                   `json:"target"`
	BundleDigest    string                   `json:"bundle_digest"`
	Manifest        bundle.Manifest          `json:"manifest"`
	Files           map[string]artifacts.Ref `json:"files"` // bundle path → blob
	Strategy        string                   `json:"strategy"`
	LatencyBudgetMs float64                  `json:"latency_budget_ms,omitempty"`
	Candidates      []string                 `json:"candidates"`
	BenchTime       time.Duration            `json:"bench_time_ns,omitempty"`
	Warmup          time.Duration            `json:"warmup_ns,omitempty"` // longest warm-up; 0: a quarter of BenchTime
	CandidateTime   time.Duration            `json:"candidate_timeout_ns,omitempty"`
	WorkKeys        map[string]string        `json:"work_keys"` // graph → work key
	SubmittedAt     time.Time                `json:"submitted_at"`
	SubmittedBy     string                   `json:"submitted_by"`
	Command         []string                 `json:"command,omitempty"`
	Tunefleet       string                   `json:"tunefleet"`
	// RetryFailed: build every candidate, even those the negative cache
	// says failed deterministically on the same work before.
	RetryFailed bool `json:"retry_failed,omitempty"`
	// Nightly is the nightly that submitted the run ("" for one submitted
	// by hand); finalize copies it into the run's history entry.
	Nightly string `json:"nightly,omitempty"`
	// FindMaxBatch: each graph's max batch is first extended to where a
	// neutral engine's throughput saturates, as AITune's tune does
	// (tuner.Options.FindMaxBatch).
	FindMaxBatch bool `json:"find_max_batch,omitempty"`
	// Baseline is the candidate winners' speedups are measured against
	// ("": the least optimized candidate).
	Baseline string `json:"baseline,omitempty"`
	// Remeasure: tune and measure every graph again even where the
	// result index holds a result of the same work measured with the same
	// settings (--remeasure); the new results supersede the indexed ones.
	Remeasure bool `json:"remeasure,omitempty"`
	// Work is the run's work id (Prepared.Work): its id computed without the
	// nightly that submitted it, the same for every night that submits
	// the same bundle with the same settings. Finalize copies it into
	// latest.json, where the next nightly finds that its work is done.
	// Empty in run.json written before it was recorded.
	Work string `json:"work,omitempty"`
}

// StopRule is the stop rule the run measures with: the default one with
// the run's bench time and warm-up bound. A result indexed with another
// (resultindex.Measured) is measured again rather than reused.
func (s *RunSpec) StopRule() backend.StopRule {
	rule := backend.DefaultStopRule()
	if s.BenchTime > 0 {
		rule.MaxTime = s.BenchTime
	}
	rule.WarmupTime = s.Warmup
	return rule
}
