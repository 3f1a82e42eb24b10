package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
)

// AttestationFile is where fetch lays out a run's signed provenance
// beside what it fetched, for tunefleet.load (Python) to check again.
const AttestationFile = deployverify.AttestationFile

// SignKeyEnv configures the signing key when --sign-key is not given: the
// key's PEM itself (a Kubernetes Secret's key as an environment variable)
// or the path of its file (a mounted Secret or compose secret). Its value
// is never printed.
const SignKeyEnv = "TUNEFLEET_SIGN_KEY"

// registerSignKey adds --sign-key to the commands that run finalize
// (producer's, for the runs it finalizes itself; worker run).
func (s *services) registerSignKey(fl *pflag.FlagSet) {
	fl.StringVar(&s.signKey, "sign-key", "",
		"private key (ed25519 or ECDSA P-256, PEM) that signs each finished run's provenance at finalize, into runs/<run>/attestation.intoto.jsonl (default $"+SignKeyEnv+": the key's PEM or its file, e.g. from a Secret; none: unsigned)")
}

// signer loads the signing key, if one is configured. Neither the flag's
// nor the variable's value is ever repeated in a message: a key body
// given where a path was expected (base64 without its PEM armour) would
// otherwise land in pod and CI logs as "open <the key>: no such file".
func (s *services) signer() (*provenance.Signer, error) {
	p, from := s.signKey, "--sign-key"
	if p == "" {
		env := os.Getenv(SignKeyEnv)
		if strings.Contains(env, "-----BEGIN") {
			k, err := provenance.ParseSigner([]byte(env))
			if err != nil {
				// The message names the variable, never its value.
				return nil, usageErr(fmt.Errorf("$%s holds a PEM block that is not a usable signing key: %w", SignKeyEnv, err))
			}
			k.Source = "$" + SignKeyEnv
			return k, nil
		}
		p, from = env, "$"+SignKeyEnv
	}
	if p == "" {
		return nil, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%w: %s is not a PEM private key nor a file that can be read (%s); give the key's file, or its PEM with the -----BEGIN PRIVATE KEY----- line",
			provenance.ErrBadKey, from, keyReadProblem(err)))
	}
	k, err := provenance.ParseSigner(data)
	if err != nil {
		return nil, usageErr(fmt.Errorf("the signing key's file (%s): %w", from, err))
	}
	k.Source = from
	return k, nil
}

// keyReadProblem says why a key's file could not be read without naming
// the path (which may be the key itself).
func keyReadProblem(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return "unreadable"
}

// verifyFlags are fetch's signature checks.
type verifyFlags struct {
	keys    []string
	require bool
	// Freshness of the signed latest pointer (fetch without --run).
	minSequence int64
	maxAge      time.Duration
	seen        string
}

// DefaultMaxAge is how old a signed latest pointer fetch --verify-key
// accepts unless told (--max-age): a pointer that has not moved for a
// month may be an old one replayed to hide newer runs.
const DefaultMaxAge = 30 * 24 * time.Hour

// SeenEnv overrides where fetch --verify-key records the highest pointer
// sequence it has seen per model, platform and key.
const SeenEnv = "TUNEFLEET_SEEN"

func (v *verifyFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&v.keys, "verify-key", nil,
		"public key (PEM) the run's provenance must be signed by (repeatable: any one of them, for key rotation); refuses an unsigned run, a bad signature and an engine or checkpoint file that is not a signed subject, writing nothing")
	fl.BoolVar(&v.require, "require-signature", false, "refuse a run without signed provenance (needs --verify-key, which implies it)")
	fl.Int64Var(&v.minSequence, "min-sequence", 0, "with --verify-key and no --run: refuse a signed latest pointer whose sequence is below this (a rollback), besides the highest one this machine has seen")
	fl.DurationVar(&v.maxAge, "max-age", DefaultMaxAge, "with --verify-key and no --run: refuse a signed latest pointer that last moved longer ago than this (0: any age)")
	fl.StringVar(&v.seen, "seen", "", "with --verify-key: the file recording the highest latest-pointer sequence seen per model, platform and key (default $"+SeenEnv+", else $XDG_STATE_HOME/tunefleet/seen.json or ~/.local/state/tunefleet/seen.json)")
}

// load reads the verify keys; nil when fetch verifies nothing.
func (v *verifyFlags) load() ([]*provenance.Verifier, error) {
	if v.require && len(v.keys) == 0 {
		return nil, usageErr(fmt.Errorf("--require-signature needs --verify-key PUB.pem: a signature is only worth what the key it is checked against"))
	}
	var out []*provenance.Verifier
	for _, p := range v.keys {
		k, err := provenance.LoadVerifier(p)
		if err != nil {
			return nil, usageErr(err)
		}
		out = append(out, k)
	}
	return out, nil
}

// checkSigned is a fetch's Check: with verify keys, the run's signed
// provenance must verify with one of them and name the state, every
// engine and (checkpoint) every checkpoint file with their digests; the
// envelope is laid out beside what is fetched. Its refusals are
// provenance.ErrRefused (the run is not deployable: ExitVerify).
func checkSigned(ctx context.Context, store artifacts.Store, keys []*provenance.Verifier, checkpoint bool) func(*state.State, []byte) (map[string][]byte, error) {
	if len(keys) == 0 {
		return nil
	}
	return func(st *state.State, data []byte) (map[string][]byte, error) {
		return runSigned(ctx, store, keys, checkpoint, st, data)
	}
}

// layoutSeal is a verifying fetch's check of the layout it wrote: the
// run's attestation of that layout (runs/<run>/layouts/<layout>.intoto.jsonl),
// read and its signature checked before anything is downloaded, then every
// staged file checked against it by its path in the layout, and laid out
// as DIR/tunefleet.intoto.jsonl, so that the directory verifies on its own
// (producer verify, cosign). A run signed before layouts were has none:
// Missing says so, and the fetch goes on as before.
type layoutSeal struct {
	layout, out string
	keys        []*provenance.Verifier
	jsonl       []byte
	// Missing: the run has no attestation of this layout.
	Missing bool
	run     string
}

// check wraps a fetch's Check: after it, the layout's attestation.
func (l *layoutSeal) check(ctx context.Context, store artifacts.Store, next func(*state.State, []byte) (map[string][]byte, error)) func(*state.State, []byte) (map[string][]byte, error) {
	return func(st *state.State, data []byte) (map[string][]byte, error) {
		extra, err := next(st, data)
		if err != nil {
			return nil, err
		}
		l.run = st.Run
		key := artifacts.LayoutAttestationKey(st.Run, l.layout)
		jsonl, err := artifacts.ReadObject(ctx, store, key, artifacts.MaxJSONSize)
		if errors.Is(err, artifacts.ErrNotExist) {
			l.Missing = true
			return extra, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		if _, err := provenance.VerifyLayout(ctx, path.Base(key)+" of run "+st.Run, jsonl, l.keys, l.layout); err != nil {
			return nil, err
		}
		l.jsonl = jsonl
		extra[deployverify.LayoutAttestationFile] = jsonl
		return extra, nil
	}
}

// sealer is a fetch's Seal: the staged directory against the layout's
// attestation (none: nothing to check; nil: a fetch that verifies nothing).
func (l *layoutSeal) sealer(ctx context.Context) func(*state.State, string) error {
	if l == nil {
		return nil
	}
	return func(_ *state.State, stage string) error {
		if l.jsonl == nil {
			return nil
		}
		_, err := deployverify.CheckLayout(ctx, stage, l.out, l.layout, l.jsonl, l.keys)
		return err
	}
}

// runSigned is checkSigned's check of one state.
func runSigned(ctx context.Context, store artifacts.Store, keys []*provenance.Verifier, checkpoint bool, st *state.State, data []byte) (map[string][]byte, error) {
	{
		key := artifacts.AttestationKey(st.Run)
		env, err := artifacts.ReadObject(ctx, store, key, artifacts.MaxJSONSize)
		if errors.Is(err, artifacts.ErrNotExist) {
			return nil, fmt.Errorf("%w (%s): run %s has no signed provenance (%s is missing): refusing it, as --verify-key asks; sign runs at finalize with --sign-key or $%s",
				provenance.ErrRefused, provenance.CheckSignature, st.Run, key, SignKeyEnv)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		v, err := provenance.Verify(ctx, path.Base(key)+" of run "+st.Run, env, keys)
		if err != nil {
			return nil, err
		}
		if err := v.CheckState(st, data, checkpoint); err != nil {
			return nil, err
		}
		return map[string][]byte{AttestationFile: env}, nil
	}
}

// resolveLatest is a verifying fetch's way to the newest good state when
// no run is named: through the signed latest pointer, never through
// latest.json alone (anyone who can write the bucket can point that at an
// older, genuinely signed run). The pointer must verify with a key, name
// the run latest.json names, and be fresh: its sequence no lower than
// --min-sequence and than the highest this machine has seen, and no
// older than --max-age. It returns the pointer to resolve through.
func (v *verifyFlags) resolveLatest(ctx context.Context, store artifacts.Store, keys []*provenance.Verifier, model, platform string) (*state.Latest, *provenance.Pointer, error) {
	pk := artifacts.LatestPointerKey(model, platform)
	lk := artifacts.LatestKey(model, platform)
	env, err := artifacts.ReadObject(ctx, store, pk, artifacts.MaxJSONSize)
	if errors.Is(err, artifacts.ErrNotExist) {
		var l state.Latest
		if lerr := artifacts.GetJSON(ctx, store, lk, &l); lerr != nil {
			return nil, nil, lerr // nothing good to fetch: said as fetch says it
		}
		return nil, nil, fmt.Errorf("%w (%s): %s names run %s, but there is no signed pointer (%s): the pointer was moved by a finalize without a signing key, so whether it is the newest cannot be checked; sign at finalize with --sign-key or $%s, or verify that run alone with fetch --run %s",
			provenance.ErrRefused, provenance.CheckSignature, lk, l.Run, pk, SignKeyEnv, l.Run)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", pk, err)
	}
	p, err := provenance.VerifyPointer(ctx, pk, env, keys, model, platform)
	if err != nil {
		return nil, nil, err
	}
	var l state.Latest
	if err := artifacts.GetJSON(ctx, store, lk, &l); err != nil && !errors.Is(err, artifacts.ErrNotExist) {
		return nil, nil, err
	}
	if l.Run != "" && (l.Run != p.Run || l.StateSHA256 != p.StateSHA256) {
		return nil, nil, fmt.Errorf("%w (%s): %s names run %s, but the signed pointer names run %s (sequence %d, moved %s): latest.json was moved without a signature, by an unsigned finalize or by hand; refusing it (fetch --run %s verifies the signed one alone)",
			provenance.ErrRefused, provenance.CheckRollback, lk, l.Run, p.Run, p.Sequence, p.MovedAt.UTC().Format(time.RFC3339), p.Run)
	}
	f := provenance.Freshness{MinSequence: v.minSequence, MaxAge: v.maxAge}
	rec, _ := v.readSeen()
	if seen := rec.Seen[seenKey(p)]; seen > f.MinSequence {
		f.MinSequence = seen
	}
	if err := f.Check(pk, p, time.Now()); err != nil {
		return nil, nil, err
	}
	ref := artifacts.Ref{SHA256: p.StateSHA256}
	return &state.Latest{Format: state.LatestFormat, Model: model, Platform: platform, Run: p.Run,
		StateKey: ref.Key(), StateSHA256: p.StateSHA256, Sequence: p.Sequence, MovedAt: p.MovedAt}, p, nil
}

// seenRecord is the file of the highest pointer sequences a machine has
// fetched, by model, platform and signing key.
type seenRecord struct {
	Format string           `json:"format"`
	Seen   map[string]int64 `json:"seen"`
}

const seenFormat = "tunefleet.seen/v1"

// seenKey names a pointer in the record: its model and platform and the
// key that signed it (another fleet's pointer of the same name is another
// sequence).
func seenKey(p *provenance.Pointer) string { return p.Model + " " + p.Platform + " " + p.KeyID }

// seenPath is where the record lives.
func (v *verifyFlags) seenPath() string {
	if v.seen != "" {
		return v.seen
	}
	if e := os.Getenv(SeenEnv); e != "" {
		return e
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "tunefleet", "seen.json")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "tunefleet", "seen.json")
	}
	return ""
}

func (v *verifyFlags) readSeen() (seenRecord, error) {
	rec := seenRecord{Format: seenFormat, Seen: map[string]int64{}}
	p := v.seenPath()
	if p == "" {
		return rec, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.Seen == nil {
		return seenRecord{Format: seenFormat, Seen: map[string]int64{}}, fmt.Errorf("%s: not a record of seen sequences", p)
	}
	return rec, nil
}

// remember records a fetched pointer's sequence (the highest seen wins),
// replacing the file whole. It is best effort: a machine that cannot
// write it (a read-only root) still fetched what it verified, and says
// so on stderr.
func (v *verifyFlags) remember(p *provenance.Pointer, stderr io.Writer) {
	path := v.seenPath()
	if path == "" || p == nil {
		return
	}
	rec, _ := v.readSeen()
	k := seenKey(p)
	if rec.Seen[k] >= p.Sequence {
		return
	}
	rec.Seen[k] = p.Sequence
	data, _ := json.MarshalIndent(rec, "", "  ")
	err := writeReplacing(path, append(data, '\n'))
	if err != nil {
		fmt.Fprintf(stderr, "warning: could not record sequence %d of %s on %s as seen (%s): %v\n", p.Sequence, p.Model, p.Platform, path, err)
	}
}

// writeReplacing writes a small file whole: into a temporary file beside
// it, renamed over it, so a reader never sees half of it.
func writeReplacing(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".seen-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
