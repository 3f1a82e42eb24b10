package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
)

// AttestationFile is where fetch lays out a run's signed provenance
// beside what it fetched, for tunefleet.load (Python) to check again.
const AttestationFile = "attestation.intoto.jsonl"

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
}

func (v *verifyFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&v.keys, "verify-key", nil,
		"public key (PEM) the run's provenance must be signed by (repeatable: any one of them, for key rotation); refuses an unsigned run, a bad signature and an engine or checkpoint file that is not a signed subject, writing nothing")
	fl.BoolVar(&v.require, "require-signature", false, "refuse a run without signed provenance (needs --verify-key, which implies it)")
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
