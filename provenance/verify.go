package provenance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tunefleet/tunefleet/state"
)

// ErrRefused marks provenance that does not vouch for what deploy tooling
// was about to fetch: no envelope, none signed by a verify key, or a
// subject missing or with another digest. The artifact is not deployable
// (its own exit code, 4), unlike a bad key file (ErrBadKey, the user's
// input). Every refusal names the check that failed (Check*).
var ErrRefused = errors.New("verification failed")

// The checks a refusal names, so that deploy tooling and its operator know
// what failed without parsing the rest: the key (no signature by a verify
// key), the signature (none, or one that does not verify), a digest (a
// subject missing or with other bytes).
const (
	CheckKey       = "key"
	CheckSignature = "signature"
	CheckDigest    = "digest"
)

// refused is a refusal by check.
func refused(check, format string, args ...any) error {
	return fmt.Errorf("%w (%s): "+format, append([]any{ErrRefused, check}, args...)...)
}

// Verified is an envelope that verified: its signer and its Statement.
type Verified struct {
	KeyID     string
	Key       *Verifier
	Statement *intoto.Statement
	// Subjects maps subject name → sha256 (hex).
	Subjects map[string]string
}

// Verify checks attestation.intoto.jsonl (what) against the verify keys:
// the first envelope signed by one of them whose payload is an in-toto
// Statement with the SLSA provenance v1 predicate is returned. what names
// the file in messages.
func Verify(ctx context.Context, what string, jsonl []byte, keys []*Verifier) (*Verified, error) {
	return verifyAs(ctx, what, jsonl, keys, PredicateType)
}

// verifyAs is Verify for Statements of the predicate type given.
func verifyAs(ctx context.Context, what string, jsonl []byte, keys []*Verifier, predicateType string) (*Verified, error) {
	return verifyWhere(ctx, what, jsonl, keys, predicateType, nil)
}

// verifyWhere is verifyAs taking only a Statement accept says is the one
// looked for (nil: any), of the envelopes a file holds.
func verifyWhere(ctx context.Context, what string, jsonl []byte, keys []*Verifier, predicateType string, accept func(*intoto.Statement) bool) (*Verified, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no verify key", ErrBadKey)
	}
	// Each key twice: by its id, and by the id envelopes carried before
	// it took securesystemslib's form.
	providers := make([]dsse.Verifier, 0, 2*len(keys))
	for _, k := range keys {
		providers = append(providers, k, k.legacy())
	}
	var signedBy []string
	var problems []string
	otherSigned := 0 // envelopes signed by a verify key, of something else
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		var env dsse.Envelope
		if err := json.Unmarshal(line, &env); err != nil {
			problems = append(problems, fmt.Sprintf("line %d is not a DSSE envelope: %v", n, err))
			continue
		}
		for _, s := range env.Signatures {
			signedBy = append(signedBy, s.KeyID)
		}
		if env.PayloadType != PayloadType {
			problems = append(problems, fmt.Sprintf("line %d has payload type %q, want %q", n, env.PayloadType, PayloadType))
			continue
		}
		// A verifier per envelope: dsse's drops the keys it has used.
		ev, err := dsse.NewEnvelopeVerifier(providers...)
		if err != nil {
			return nil, err
		}
		accepted, body, err := ev.VerifyAndDecode(ctx, &env)
		if err != nil || len(accepted) == 0 {
			continue
		}
		var stmt intoto.Statement
		if err := protojson.Unmarshal(body, &stmt); err != nil {
			problems = append(problems, fmt.Sprintf("line %d: signed payload is not an in-toto Statement: %v", n, err))
			continue
		}
		if err := stmt.Validate(); err != nil || stmt.GetType() != intoto.StatementTypeUri || stmt.GetPredicateType() != predicateType {
			problems = append(problems, fmt.Sprintf("line %d: signed Statement is not an in-toto v1 Statement of %s (%v)", n, predicateType, err))
			continue
		}
		if accept != nil && !accept(&stmt) {
			otherSigned++
			continue
		}
		v := &Verified{KeyID: accepted[0].KeyID, Statement: &stmt, Subjects: map[string]string{}}
		for _, k := range keys {
			if k.owns(v.KeyID) {
				v.Key = k
			}
		}
		for _, s := range stmt.GetSubject() {
			v.Subjects[s.GetName()] = s.GetDigest()["sha256"]
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return nil, refused(CheckSignature, "%s: %w", what, err)
	}
	if n == 0 {
		return nil, refused(CheckSignature, "%s holds no envelope", what)
	}
	if otherSigned > 0 {
		return nil, refused(CheckDigest, "%s: its %d envelope(s) signed by a verify key sign another layout or file than the one checked: it was copied from another directory", what, otherSigned)
	}
	tried := make([]string, len(keys))
	known := false
	for i, k := range keys {
		tried[i] = k.describe()
		for _, id := range signedBy {
			known = known || k.owns(id)
		}
	}
	msg := fmt.Sprintf("%s: no envelope carries a valid signature by a verify key (tried %s", what, joinComma(tried))
	if len(signedBy) > 0 {
		msg += "; it is signed by key id " + shortIDs(signedBy)
	}
	msg += ")"
	if known {
		// A verify key's id, a signature that does not verify: either the
		// payload (or the signature) changed after finalize signed it, or
		// another key signed it under that id (an id is only a hint).
		msg += ": the signature under a verify key's id does not verify: the envelope was changed after it was signed, or another key signed it claiming that id"
	}
	if len(problems) > 0 {
		msg += ": " + joinComma(problems)
	}
	check := CheckKey
	if known {
		check = CheckSignature
	}
	return nil, refused(check, "%s", msg)
}

// Run is the run the verified provenance is of (its invocation id).
func (v *Verified) Run() string {
	return v.Statement.GetPredicate().GetFields()["runDetails"].GetStructValue().
		GetFields()["metadata"].GetStructValue().GetFields()["invocationId"].GetStringValue()
}

// CheckState checks that the verified Statement names this state (its
// exact bytes), every engine it names, and, with checkpoint, every file of
// its AITune checkpoint, with the same digests.
func (v *Verified) CheckState(st *state.State, data []byte, checkpoint bool) error {
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	want, ok := v.Subjects[StateSubject]
	if !ok {
		return refused(CheckDigest, "run %s: its signed provenance has no %s subject", st.Run, StateSubject)
	}
	if got != want {
		return refused(CheckDigest, "run %s: state.json (sha256 %s) is not the state its signed provenance names (sha256 %s): it was changed after finalize signed it", st.Run, got, want)
	}
	for _, g := range st.Graphs {
		if g.Engine == nil {
			continue
		}
		name := EngineSubject(g.Name, g.Engine.File)
		if w, ok := v.Subjects[name]; !ok || w != g.Engine.SHA256 {
			return refused(CheckDigest, "run %s: the engine of graph %s (sha256 %s) is not a subject of its signed provenance", st.Run, g.Name, g.Engine.SHA256)
		}
	}
	if checkpoint && st.AITune != nil {
		for _, f := range st.AITune.Files {
			name := CheckpointSubject(f.Path)
			if w, ok := v.Subjects[name]; !ok || w != f.SHA256 {
				return refused(CheckDigest, "run %s: AITune checkpoint file %s (sha256 %s) is not a subject of its signed provenance", st.Run, f.Path, f.SHA256)
			}
		}
	}
	return nil
}

func joinComma(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x)
	}
	return b.String()
}
