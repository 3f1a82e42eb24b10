package provenance

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
)

// ErrBadKey marks a key file that is not an ed25519 or ECDSA P-256 key in
// PEM: the user's to fix.
var ErrBadKey = errors.New("bad key")

// KeyID is the id of a public key in an envelope, in securesystemslib's
// form: the hex sha256 of the key's canonical JSON (type, scheme, hash
// algorithms and public value), which go-securesystemslib's own verifiers
// compute from the same PEM and compare with the envelope's keyid before
// they try a signature. An id in any other form makes them skip the
// signature ("Found: 0"); cosign never compares ids.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	k, err := signerverifier.LoadKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil {
		return "", err
	}
	return k.KeyID, nil
}

// legacyKeyID is the id envelopes carried before KeyID took
// securesystemslib's form (the hex sha256 of the DER
// SubjectPublicKeyInfo): runs signed then still verify.
func legacyKeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// Signer signs DSSE envelopes with a private key; it is a
// dsse.SignerVerifier.
type Signer struct {
	key   crypto.Signer
	keyID string
	Verifier
}

// Verifier checks signatures with a public key; it is a dsse.Verifier.
type Verifier struct {
	pub   crypto.PublicKey
	keyID string
	// legacyID is the id the key had in envelopes signed before KeyID
	// took securesystemslib's form.
	legacyID string
	// Source says where the key came from, for messages.
	Source string
}

// LoadSigner reads a private key in PEM (PKCS#8 "PRIVATE KEY" holding an
// ed25519 or ECDSA P-256 key, or SEC 1 "EC PRIVATE KEY").
func LoadSigner(path string) (*Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: signing key: %w", ErrBadKey, err)
	}
	s, err := ParseSigner(data)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	s.Source = path
	return s, nil
}

// ParseSigner is LoadSigner on the file's bytes.
func ParseSigner(data []byte) (*Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block (want an ed25519 or ECDSA P-256 private key, e.g. from `openssl genpkey -algorithm ed25519`)", ErrBadKey)
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%w: PEM block %q is not a private key (want PRIVATE KEY or EC PRIVATE KEY)", ErrBadKey, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	cs, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot sign", ErrBadKey, key)
	}
	v, err := newVerifier(cs.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{key: cs, keyID: v.keyID, Verifier: *v}, nil
}

// LoadVerifier reads a public key in PEM ("PUBLIC KEY", SubjectPublicKeyInfo).
func LoadVerifier(path string) (*Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: verify key: %w", ErrBadKey, err)
	}
	v, err := ParseVerifier(data)
	if err != nil {
		return nil, fmt.Errorf("verify key %s: %w", path, err)
	}
	v.Source = path
	return v, nil
}

// ParseVerifier is LoadVerifier on the file's bytes.
func ParseVerifier(data []byte) (*Verifier, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: no PEM PUBLIC KEY block (write it with `openssl pkey -in KEY -pubout`)", ErrBadKey)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	return newVerifier(pub)
}

func newVerifier(pub crypto.PublicKey) (*Verifier, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA curve %s, want P-256", ErrBadKey, k.Curve.Params().Name)
		}
	default:
		return nil, fmt.Errorf("%w: %T, want an ed25519 or ECDSA P-256 key", ErrBadKey, pub)
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	legacy, err := legacyKeyID(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	return &Verifier{pub: pub, keyID: id, legacyID: legacy}, nil
}

// PublicPEM is the signer's public key in PEM, for deploy tooling's
// --verify-key.
func (s *Signer) PublicPEM() []byte {
	der, _ := x509.MarshalPKIXPublicKey(s.pub) // the key parsed: it marshals
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Sign signs data (DSSE's PAE): ed25519 over the message itself, ECDSA
// P-256 over its sha256, ASN.1 DER encoded (what every verifier reads).
func (s *Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	if _, ok := s.key.(ed25519.PrivateKey); ok {
		return s.key.Sign(rand.Reader, data, crypto.Hash(0))
	}
	sum := sha256.Sum256(data)
	return s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
}

// KeyID is the key's id (see KeyID).
func (v *Verifier) KeyID() (string, error) { return v.keyID, nil }

// Public is the public key.
func (v *Verifier) Public() crypto.PublicKey { return v.pub }

// Verify checks a signature of data made by Sign.
func (v *Verifier) Verify(_ context.Context, data, sig []byte) error {
	switch k := v.pub.(type) {
	case ed25519.PublicKey:
		if !ed25519.Verify(k, data, sig) {
			return errors.New("ed25519 signature does not verify")
		}
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(data)
		if !ecdsa.VerifyASN1(k, sum[:], sig) {
			return errors.New("ECDSA signature does not verify")
		}
	}
	return nil
}

// legacy is the key as envelopes signed before KeyID took
// securesystemslib's form name it: a dsse.Verifier whose KeyID is the old
// id, so dsse tries the signature.
func (v *Verifier) legacy() *legacyVerifier { return &legacyVerifier{v} }

type legacyVerifier struct{ *Verifier }

func (l *legacyVerifier) KeyID() (string, error) { return l.legacyID, nil }

// owns says whether an envelope's keyid names this key, in either form.
func (v *Verifier) owns(id string) bool { return id == v.keyID || id == v.legacyID }

// describe names a key in messages: its file and a short id.
func (v *Verifier) describe() string {
	id := v.keyID
	if len(id) > 16 {
		id = id[:16]
	}
	if v.Source == "" {
		return "key " + id
	}
	return fmt.Sprintf("%s (key id %s…)", v.Source, id)
}

// shortIDs lists key ids for messages.
func shortIDs(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if len(id) > 16 {
			id = id[:16] + "…"
		}
		out[i] = id
	}
	return strings.Join(out, ", ")
}
