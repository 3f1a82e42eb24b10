package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// SetSigner makes the finalizes this client runs itself (a run whose
// graphs were all reused) sign the run's provenance with s (nil: none).
func (c *Client) SetSigner(s *provenance.Signer) { c.signer = s }

// signRun signs the provenance of a done run (provenance.Run: every
// engine, the state blob, the AITune checkpoint) and stores it at
// runs/<run>/attestation.intoto.jsonl. Finalize calls it before
// latest.json names the state, so that deploy tooling that requires a
// signature never finds a newest good state without one.
func signRun(ctx context.Context, store artifacts.Store, signer *provenance.Signer, spec *RunSpec, ms *state.State, results map[string]*tuner.Result, data []byte) error {
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
	line, err := provenance.Sign(ctx, signer, r)
	if err != nil {
		return fmt.Errorf("sign the provenance of run %s: %w", spec.Run, err)
	}
	// Each layout's attestation goes up before the run's, whose presence
	// says the run is signed (SignFinished signs what lacks it).
	if err := signLayouts(ctx, store, signer, r); err != nil {
		return err
	}
	if err := store.Put(ctx, artifacts.AttestationKey(spec.Run), bytes.NewReader(line), int64(len(line))); err != nil {
		return permanentIfBadKey(fmt.Errorf("write the provenance of run %s: %w", spec.Run, err))
	}
	return nil
}

// Signed says what SignFinished did to a run.
type Signed struct {
	// Provenance: the run's attestation was written now (false: it was
	// there, signed at finalize, or the run is not done).
	Provenance bool
	// Pointers are the latest pointers (platform key, target class)
	// signed now; a pointer that has moved on to a newer run is left to
	// that run.
	Pointers []string
}

// SignFinished signs a done run that a worker without the signing key
// finalized: its provenance, when it has none, and each latest pointer
// that still names it. It is what `producer submit --sign-key --wait`
// does once the run ends, so a run submitted to be signed is signed
// whoever finalized it. Until then, deploy tooling that verifies refuses
// the run (it fails closed). No signer, or a run not done: nothing.
func (c *Client) SignFinished(ctx context.Context, run string) (Signed, error) {
	var out Signed
	if c.signer == nil {
		return out, nil
	}
	data, err := artifacts.ReadObject(ctx, c.store, artifacts.StateKey(run), artifacts.MaxJSONSize)
	if err != nil {
		return out, fmt.Errorf("sign run %s: %w", run, err)
	}
	var ms state.State
	if err := json.Unmarshal(data, &ms); err != nil {
		return out, fmt.Errorf("sign run %s: its state.json: %w", run, err)
	}
	if ms.Status != runstate.RunDone {
		return out, nil
	}
	if _, err := artifacts.ReadObject(ctx, c.store, artifacts.AttestationKey(run), artifacts.MaxJSONSize); errors.Is(err, artifacts.ErrNotExist) {
		var spec RunSpec
		if err := artifacts.GetJSON(ctx, c.store, artifacts.RunKey(run), &spec); err != nil {
			return out, fmt.Errorf("sign run %s: %w", run, err)
		}
		results := map[string]*tuner.Result{}
		for _, g := range spec.Manifest.Graphs {
			var r tuner.Result
			if err := artifacts.GetJSON(ctx, c.store, artifacts.GraphResultKey(run, g.Name), &r); err == nil {
				results[g.Name] = &r
			} else if !errors.Is(err, artifacts.ErrNotExist) {
				return out, fmt.Errorf("sign run %s: %w", run, err)
			}
		}
		if err := signRun(ctx, c.store, c.signer, &spec, &ms, results, data); err != nil {
			return out, err
		}
		out.Provenance = true
	} else if err != nil {
		return out, fmt.Errorf("sign run %s: %w", run, err)
	}
	for _, where := range uniq(ms.Platform, ms.Target) {
		signed, err := c.signPointer(ctx, ms.Model, where, run)
		if err != nil {
			return out, err
		}
		if signed {
			out.Pointers = append(out.Pointers, where)
		}
	}
	return out, nil
}

// signPointer signs the latest pointer of model on platform as it stands,
// under the pointer's lock, when it names run and its signed form does not
// say so already.
func (c *Client) signPointer(ctx context.Context, model, platform, run string) (bool, error) {
	key := artifacts.LatestKey(model, platform)
	signed := false
	err := c.runs.Locked(ctx, key, func(ctx context.Context) error {
		var l state.Latest
		if err := artifacts.GetJSON(ctx, c.store, key, &l); err != nil {
			if errors.Is(err, artifacts.ErrNotExist) {
				return nil
			}
			return err
		}
		if l.Run != run || l.Sequence < 1 {
			return nil // moved on to a newer run (or a pointer from before sequences)
		}
		pk := artifacts.LatestPointerKey(model, platform)
		if env, err := artifacts.ReadObject(ctx, c.store, pk, artifacts.MaxJSONSize); err == nil {
			if p, err := provenance.VerifyPointer(ctx, pk, env, []*provenance.Verifier{&c.signer.Verifier}, model, platform); err == nil &&
				p.Run == l.Run && p.StateSHA256 == l.StateSHA256 && p.Sequence == l.Sequence {
				return nil // signed already
			}
		}
		line, err := provenance.SignPointer(ctx, c.signer, provenance.Pointer{
			Model: model, Platform: platform, Run: l.Run, StateSHA256: l.StateSHA256, Sequence: l.Sequence, MovedAt: l.MovedAt,
		})
		if err != nil {
			return fmt.Errorf("sign the latest pointer of %s on %s: %w", model, platform, err)
		}
		if err := c.store.Put(ctx, pk, bytes.NewReader(line), int64(len(line))); err != nil {
			return fmt.Errorf("write %s: %w", pk, err)
		}
		signed = true
		return nil
	})
	return signed, err
}

// signLayouts signs, for each layout fetch can lay the run out in, every
// file of that directory by its path there (deployverify.Files) and
// stores it at runs/<run>/layouts/<layout>.intoto.jsonl: fetch lays it out
// beside the files, so the directory verifies on its own, by producer
// verify or by cosign. The layouts are deterministic from the state; a
// Triton repository's config.pbtxt needs each ONNX engine's inputs and
// outputs, read from a copy of the engine in a temporary folder. A layout
// the run has none of (no checkpoint; a winner Triton cannot serve) is
// not signed: fetch refuses it anyway.
func signLayouts(ctx context.Context, store artifacts.Store, signer *provenance.Signer, r provenance.Run) error {
	tmp, err := os.MkdirTemp("", "tunefleet-sign-")
	if err != nil {
		return fmt.Errorf("sign the layouts of run %s: %w", r.State.Run, err)
	}
	defer os.RemoveAll(tmp)
	readIO := func(g state.StateGraph) (bundle.GraphIO, error) {
		p := filepath.Join(tmp, g.Engine.SHA256)
		if err := artifacts.FetchFile(ctx, store, artifacts.Ref{SHA256: g.Engine.SHA256, Size: g.Engine.Size}, p); err != nil {
			return bundle.GraphIO{}, err
		}
		return bundle.ReadGraphIO(p)
	}
	for _, layout := range deployverify.Layouts {
		files, err := deployverify.Files(r.State, r.StateData, layout, readIO)
		if errors.Is(err, deployverify.ErrNoLayout) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sign the %s layout of run %s: %w", layout, r.State.Run, err)
		}
		line, err := provenance.SignLayout(ctx, signer, r, layout, files)
		if err != nil {
			return fmt.Errorf("sign the %s layout of run %s: %w", layout, r.State.Run, err)
		}
		key := artifacts.LayoutAttestationKey(r.State.Run, layout)
		if err := store.Put(ctx, key, bytes.NewReader(line), int64(len(line))); err != nil {
			return permanentIfBadKey(fmt.Errorf("write %s: %w", key, err))
		}
	}
	return nil
}

// Signs says whether the client signs the runs it finalizes (SetSigner).
func (c *Client) Signs() bool { return c.signer != nil }
