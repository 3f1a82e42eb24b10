package jobs

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// SetSigner makes the finalizes this client runs itself (a run whose
// graphs were all reused) sign the run's provenance with s (nil: none).
func (c *Client) SetSigner(s *provenance.Signer) { c.signer = s }

// attest signs the provenance of a done run (provenance.Run: every
// engine, the state blob, the AITune checkpoint) and stores it at
// runs/<run>/attestation.intoto.jsonl, before latest.json names the
// state, so that deploy tooling that requires a signature never finds a
// newest good state without one. No signer: nothing to do.
func (w *Worker) attest(ctx context.Context, spec *RunSpec, ms *state.State, results map[string]*tuner.Result, data []byte) error {
	if w.cfg.Signer == nil || ms.Status != runstate.RunDone {
		return nil
	}
	r := provenance.Run{
		State: ms, StateData: data, BenchTime: spec.BenchTime, CandidateTimeout: spec.CandidateTime,
		Tolerances: map[string]any{},
	}
	for _, g := range spec.Manifest.Graphs {
		if len(g.Tolerances) > 0 {
			r.Tolerances[g.Name] = g.Tolerances
		}
		res := results[g.Name]
		if res == nil {
			continue
		}
		gr := provenance.GraphRun{
			Graph: g.Name, Platform: res.Platform, Reused: res.Reused,
			BatchSizes: res.BatchSizes, StartedAt: res.StartedAt, Duration: res.Duration,
		}
		if res.Winner != nil && res.Winner.Index >= 0 && res.Winner.Index < len(res.Results) {
			gr.Toolchain = res.Results[res.Winner.Index].Info
		}
		r.Graphs = append(r.Graphs, gr)
	}
	line, err := provenance.Sign(ctx, w.cfg.Signer, r)
	if err != nil {
		return fmt.Errorf("sign the provenance of run %s: %w", spec.Run, err)
	}
	if err := w.cfg.Store.Put(ctx, artifacts.AttestationKey(spec.Run), bytes.NewReader(line), int64(len(line))); err != nil {
		return permanentIfBadKey(fmt.Errorf("write the provenance of run %s: %w", spec.Run, err))
	}
	return nil
}
