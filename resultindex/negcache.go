package resultindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/tuner"
)

// The negative cache: a candidate that failed deterministically (it did not
// build, or it gave wrong answers) on a work key on a platform is not built
// again for the same work key on that platform while the toolchain stays
// the same. A TensorRT build that fails tonight fails the same way tomorrow,
// and may have cost an hour. The entry lives beside the result index, at
// artifacts.NegativeCacheKey; a run submitted with RetryFailed builds every
// candidate again (and records what it finds).

// NegativeFormat is the version of a negative cache entry.
const NegativeFormat = "tunefleet.negative/v1"

// negativeClasses are the failure classes worth remembering: the candidate
// itself, not the machine or the moment. Runtime failures can be a GPU in a
// bad state; timeouts and infrastructure failures are retried anyway.
var negativeClasses = map[backend.FailureClass]bool{backend.FailBuild: true, backend.FailWrongAnswer: true}

// Toolchain is what a deterministic failure depends on beyond the work key
// and the platform key: an entry recorded by another toolchain is ignored.
type Toolchain struct {
	TensorRT     string `json:"tensorrt,omitempty"`
	Driver       string `json:"driver,omitempty"`
	ORT          string `json:"ort,omitempty"`
	ResultFormat string `json:"result_format"`
}

// ToolchainOf is the toolchain of a machine.
func ToolchainOf(fp gpu.Fingerprint) Toolchain {
	trt := fp.TensorRTVersion
	if fp.TensorRTBuild != "" {
		trt += "+" + fp.TensorRTBuild
	}
	return Toolchain{TensorRT: trt, Driver: fp.DriverVersion, ORT: fp.ORTVersion, ResultFormat: tuner.ResultFormat}
}

// NegativeEntry is one remembered failure.
type NegativeEntry struct {
	Format    string              `json:"format"`
	Platform  string              `json:"platform"`
	WorkKey   string              `json:"work_key"`
	Candidate string              `json:"candidate"`
	Toolchain Toolchain           `json:"toolchain"`
	Failure   backend.FailureInfo `json:"failure"`
	Run       string              `json:"run"`
	Graph     string              `json:"graph"`
	Attempt   int                 `json:"attempt"`
}

// KnownFailures returns the candidates of this work key the negative cache
// says fail on platform with toolchain tc, as the results that stand in
// for building them.
func KnownFailures(ctx context.Context, store artifacts.Store, tc Toolchain, platform, workKey string, candidates []string) (map[string]backend.CandidateResult, error) {
	known := map[string]backend.CandidateResult{}
	// One listing of the work key's entries, then a read of each one there:
	// most work keys have none, and a task should not pay a lookup per
	// candidate to learn it.
	prefix := artifacts.NegativeCachePrefix(platform, workKey)
	listed, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("negative cache: %w", err)
	}
	for _, c := range candidates {
		key := artifacts.NegativeCacheKey(platform, workKey, c)
		if !slices.Contains(listed, key) {
			continue
		}
		var e NegativeEntry
		err := artifacts.GetJSON(ctx, store, key, &e)
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, artifacts.ErrNotExist), errors.As(err, &syntax), errors.As(err, &typ):
			continue // none, or one not worth trusting: build it
		case err != nil:
			return nil, fmt.Errorf("negative cache: %w", err)
		}
		if e.Format != NegativeFormat || e.Toolchain != tc || e.Candidate != c || !negativeClasses[e.Failure.Class] {
			continue // another toolchain (or format): build it and see
		}
		f := e.Failure
		known[c] = backend.CandidateResult{
			Candidate: c, Status: backend.StatusFailed, Failure: &f,
			SkipReason: fmt.Sprintf("negative cache: failed (%s) on this work key, platform and toolchain in run %s graph %s; submit with --retry-failed to build it again",
				f.Class, e.Run, e.Graph),
		}
	}
	return known, nil
}

// Attempt names the attempt a negative cache entry was recorded by (what
// the skip reason of a later run points at).
type Attempt struct {
	Run, Graph string
	N          int
}

// RecordFailures writes a negative cache entry for every candidate of
// results (those of attempt a at workKey on platform, toolchain tc) that
// was built and failed deterministically; a candidate skipped (its
// SkipReason set, e.g. by the negative cache itself) is not recorded.
func RecordFailures(ctx context.Context, store artifacts.Store, tc Toolchain, platform, workKey string, a Attempt, results []backend.CandidateResult) error {
	for _, cr := range results {
		if cr.Status != backend.StatusFailed || cr.Failure == nil || cr.SkipReason != "" || !negativeClasses[cr.Failure.Class] {
			continue
		}
		e := NegativeEntry{
			Format: NegativeFormat, Platform: platform, WorkKey: workKey, Candidate: cr.Candidate, Toolchain: tc,
			Failure: *cr.Failure, Run: a.Run, Graph: a.Graph, Attempt: a.N,
		}
		if err := artifacts.PutJSON(ctx, store, artifacts.NegativeCacheKey(platform, workKey, cr.Candidate), e); err != nil {
			return fmt.Errorf("negative cache: %w", err)
		}
	}
	return nil
}
