package provenance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// PointerPredicateType is the predicate of a signed latest pointer: which
// run's state is the newest good one of a model on a platform, its
// sequence and when it moved there.
const PointerPredicateType = "https://github.com/tunefleet/tunefleet/blob/main/docs/deploy-tooling.md#latest-pointer-v1"

// The freshness checks a refusal may name besides key, signature and
// digest: a pointer that went backwards, one too old to trust.
const (
	CheckRollback = "rollback"
	CheckStale    = "stale"
)

// Pointer is what a signed latest pointer says. Sequence goes up by one
// each time the pointer moves (finalize reads the one before under the
// pointer's lock), so deploy tooling that remembers the highest it has
// seen can refuse an older pointer replayed at it: a rollback to a run
// that is genuinely signed, but not the newest.
type Pointer struct {
	Model       string    `json:"model"`
	Platform    string    `json:"platform"`
	Run         string    `json:"run"`
	StateSHA256 string    `json:"state_sha256"`
	Sequence    int64     `json:"sequence"`
	MovedAt     time.Time `json:"moved_at"`
	// KeyID is the key that signed it (set by VerifyPointer).
	KeyID string `json:"-"`
}

// SignPointer signs p: an in-toto Statement whose one subject is the state
// (state.json, by the digest of the state blob) and whose predicate is p.
// It returns the envelope's line (JSON and a newline).
func SignPointer(ctx context.Context, s *Signer, p Pointer) ([]byte, error) {
	pred, err := structpb.NewStruct(map[string]any{
		"model": p.Model, "platform": p.Platform, "run": p.Run, "state_sha256": p.StateSHA256,
		"sequence": float64(p.Sequence), "moved_at": p.MovedAt.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("provenance: pointer: %w", err)
	}
	stmt := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: StateSubject, Digest: map[string]string{"sha256": p.StateSHA256}}},
		PredicateType: PointerPredicateType,
		Predicate:     pred,
	}
	if err := stmt.Validate(); err != nil {
		return nil, fmt.Errorf("provenance: pointer statement: %w", err)
	}
	return signStatement(ctx, s, stmt)
}

// VerifyPointer checks a signed latest pointer (what names the file in
// messages) against the verify keys and returns what it says, refusing
// (ErrRefused) one that no verify key signed or whose payload is not a
// pointer of model on platform.
func VerifyPointer(ctx context.Context, what string, jsonl []byte, keys []*Verifier, model, platform string) (*Pointer, error) {
	v, err := verifyAs(ctx, what, jsonl, keys, PointerPredicateType)
	if err != nil {
		return nil, err
	}
	raw, err := protojson.Marshal(v.Statement.GetPredicate())
	if err != nil {
		return nil, refused(CheckSignature, "%s: its predicate: %w", what, err)
	}
	var p Pointer
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, refused(CheckSignature, "%s: its predicate is not a latest pointer: %w", what, err)
	}
	if p.Model != model || p.Platform != platform || p.Run == "" || v.Subjects[StateSubject] != p.StateSHA256 || len(p.StateSHA256) != 64 {
		return nil, refused(CheckDigest, "%s is a pointer of model %q on %q to run %q, not a pointer of %q on %q", what, p.Model, p.Platform, p.Run, model, platform)
	}
	p.KeyID = v.KeyID
	return &p, nil
}

// Freshness is what deploy tooling demands of a pointer beyond its
// signature: a sequence no lower than MinSequence (the highest it has
// seen, or what the user gave), and no older than MaxAge (0: any age).
type Freshness struct {
	MinSequence int64
	MaxAge      time.Duration
}

// Check refuses a pointer that went backwards (CheckRollback) or is older
// than the age allowed (CheckStale), as of now.
func (f Freshness) Check(what string, p *Pointer, now time.Time) error {
	if p.Sequence < f.MinSequence {
		return refused(CheckRollback, "%s names run %s at sequence %d, older than sequence %d already seen for %s on %s: the pointer was rolled back to an earlier run; refusing it (if that is intended, fetch --run %s)",
			what, p.Run, p.Sequence, f.MinSequence, p.Model, p.Platform, p.Run)
	}
	if f.MaxAge > 0 && now.Sub(p.MovedAt) > f.MaxAge {
		return refused(CheckStale, "%s moved to run %s at %s, more than --max-age %s ago: a pointer that old may hide a newer run; refusing it (tune the model again, or raise --max-age)",
			what, p.Run, p.MovedAt.UTC().Format(time.RFC3339), f.MaxAge)
	}
	return nil
}
