package provenance_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"

	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
)

// newKey writes a fresh private key (PKCS#8 PEM) and its public key into
// dir and returns the loaded signer and verifier.
func newKey(t *testing.T, dir, name, alg string) (*provenance.Signer, *provenance.Verifier) {
	t.Helper()
	var priv any
	switch alg {
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv = k
	case "p256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv = k
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	kp := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := provenance.LoadSigner(kp)
	if err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pp, s.PublicPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := provenance.LoadVerifier(pp)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

func testRun() provenance.Run {
	st := &state.State{
		Format: state.StateFormat, Model: "m", Platform: "cpu-x", Target: "cpu", Run: "m-1", Status: "done",
		Graphs: []state.StateGraph{
			{Name: "0", Candidate: "ort:cpu:all", Engine: &state.EngineRef{File: "model.optimized.onnx", SHA256: strings.Repeat("a", 64), Size: 3}},
			{Name: "1", Candidate: "ort:cpu:basic", Engine: &state.EngineRef{File: "model.optimized.onnx", SHA256: strings.Repeat("b", 64), Size: 3}},
		},
		AITune: &state.Checkpoint{Name: "m", Files: []state.CheckpointFile{{Path: "m.ait", SHA256: strings.Repeat("c", 64), Size: 9}}},
		Provenance: state.Provenance{Tunefleet: "dev", Go: "go1.26", BundleDigest: "sha256:" + strings.Repeat("d", 64), Target: "cpu",
			Strategy: "max-throughput", Candidates: []string{"ort:cpu:basic", "ort:cpu:all"}, SubmittedAt: time.Unix(1000, 0), FinalizedAt: time.Unix(2000, 0)},
	}
	data, _ := json.Marshal(st)
	return provenance.Run{State: st, StateData: data, BenchTime: time.Second,
		Graphs: []provenance.GraphRun{{Graph: "0", Platform: "cpu-x", BatchSizes: []int{1, 2}, Toolchain: map[string]string{"onnxruntime": "1.24.1"}}}}
}

// Signing and verifying round-trips for both key kinds; the Statement is
// an in-toto v1 Statement of SLSA provenance v1 whose subjects are the
// state, every engine and the checkpoint's files.
func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []string{"ed25519", "p256"} {
		t.Run(alg, func(t *testing.T) {
			s, v := newKey(t, t.TempDir(), "k", alg)
			r := testRun()
			line, err := provenance.Sign(ctx, s, r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := provenance.Verify(ctx, "test", line, []*provenance.Verifier{v})
			if err != nil {
				t.Fatal(err)
			}
			kid, _ := v.KeyID()
			if got.KeyID != kid || got.Statement.GetPredicateType() != provenance.PredicateType {
				t.Errorf("verified by %s, predicate %s", got.KeyID, got.Statement.GetPredicateType())
			}
			for _, name := range []string{"state.json", "engines/0/model.optimized.onnx", "engines/1/model.optimized.onnx", "aitune/m.ait"} {
				if got.Subjects[name] == "" {
					t.Errorf("no subject %s in %v", name, got.Subjects)
				}
			}
			if err := got.CheckState(r.State, r.StateData, true); err != nil {
				t.Error(err)
			}
		})
	}
}

// The refusals: wrong key, a statement changed after signing, a state
// changed after signing, an engine or checkpoint file that is not a
// subject; key rotation accepts any one of several keys.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, v := newKey(t, dir, "new", "ed25519")
	_, old := newKey(t, dir, "old", "p256")
	_, other := newKey(t, dir, "other", "ed25519")
	r := testRun()
	line, err := provenance.Sign(ctx, s, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provenance.Verify(ctx, "test", line, []*provenance.Verifier{old, v}); err != nil {
		t.Errorf("rotation (old key first, signed by the new): %v", err)
	}
	wantRefused := func(name string, err error, msg string) {
		t.Helper()
		if !errors.Is(err, provenance.ErrRefused) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, msg)
		}
	}
	_, err = provenance.Verify(ctx, "test", line, []*provenance.Verifier{other, old})
	wantRefused("wrong key", err, "no envelope carries a valid signature by a verify key")

	// A statement changed after signing: a subject's digest swapped.
	var env map[string]any
	if err := json.Unmarshal(line, &env); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	env["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(strings.Repeat("a", 64)), []byte(strings.Repeat("e", 64)), 1))
	tampered, _ := json.Marshal(env)
	_, err = provenance.Verify(ctx, "test", tampered, []*provenance.Verifier{v})
	wantRefused("tampered statement", err, "the envelope was changed after it was signed, or another key signed it claiming that id")

	got, err := provenance.Verify(ctx, "test", line, []*provenance.Verifier{v})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused("changed state", got.CheckState(r.State, append([]byte(" "), r.StateData...), false), "is not the state its signed provenance names")
	delete(got.Subjects, "engines/1/model.optimized.onnx")
	wantRefused("engine not a subject", got.CheckState(r.State, r.StateData, false), "the engine of graph 1 (sha256 bbbb")
	got, _ = provenance.Verify(ctx, "test", line, []*provenance.Verifier{v})
	got.Subjects["aitune/m.ait"] = strings.Repeat("f", 64)
	wantRefused("checkpoint file", got.CheckState(r.State, r.StateData, true), "AITune checkpoint file m.ait")
	if _, err := provenance.Verify(ctx, "test", nil, []*provenance.Verifier{v}); !errors.Is(err, provenance.ErrRefused) {
		t.Errorf("empty file: %v", err)
	}
}

// Keys that are not ed25519 or ECDSA P-256 in PEM are the user's to fix.
func TestBadKeys(t *testing.T) {
	dir := t.TempDir()
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(p384)
	for name, data := range map[string][]byte{
		"not pem": []byte("hello"),
		"p384":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		"public":  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, data, 0o600)
		if _, err := provenance.LoadSigner(p); !errors.Is(err, provenance.ErrBadKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := provenance.LoadSigner(filepath.Join(dir, "missing")); !errors.Is(err, provenance.ErrBadKey) {
		t.Errorf("missing: %v", err)
	}
}

// go-securesystemslib's own verifiers, loaded from the public key's PEM as
// a securesystemslib user loads it, accept our envelopes for both key
// kinds: they compare the envelope's keyid with their own before they try
// a signature, so an id in another form gets "Found: 0". A verifier of
// another key is refused by them too.
func TestSecuresystemslibVerifies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, alg := range []string{"ed25519", "p256"} {
		t.Run(alg, func(t *testing.T) {
			s, _ := newKey(t, dir, alg, alg)
			other, _ := newKey(t, dir, alg+"-other", alg)
			line, err := provenance.Sign(ctx, s, testRun())
			if err != nil {
				t.Fatal(err)
			}
			var env dsse.Envelope
			if err := json.Unmarshal(line, &env); err != nil {
				t.Fatal(err)
			}
			sslib := func(pub []byte) dsse.Verifier {
				k, err := signerverifier.LoadKey(pub)
				if err != nil {
					t.Fatal(err)
				}
				var v dsse.Verifier
				if alg == "ed25519" {
					v, err = signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
				} else {
					v, err = signerverifier.NewECDSASignerVerifierFromSSLibKey(k)
				}
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			ev, err := dsse.NewEnvelopeVerifier(sslib(s.PublicPEM()))
			if err != nil {
				t.Fatal(err)
			}
			accepted, err := ev.Verify(ctx, &env)
			if err != nil || len(accepted) != 1 {
				t.Fatalf("go-securesystemslib refuses the envelope: %v (%d accepted)", err, len(accepted))
			}
			if kid, _ := s.KeyID(); accepted[0].KeyID != kid || env.Signatures[0].KeyID != kid {
				t.Errorf("accepted key id %s, envelope's %s, ours %s: want one id", accepted[0].KeyID, env.Signatures[0].KeyID, kid)
			}
			ev, _ = dsse.NewEnvelopeVerifier(sslib(other.PublicPEM()))
			if _, err := ev.Verify(ctx, &env); err == nil {
				t.Error("go-securesystemslib accepts the envelope with another key")
			}
		})
	}
}

// The Statement records what reproduces the result, nothing of the
// machines or people that made it: not the submit command line (it names
// the signing key's and the store's paths), not who submitted it from
// which host, not the workers' host names, not the store's address that a
// timing-cache failure quotes.
func TestStatementHasNoLocalDetails(t *testing.T) {
	r := testRun()
	r.State.Provenance.Command = []string{"producer", "submit", "/home/alice/bundles/m", "--sign-key", "/home/alice/.keys/sign.pem", "--store", "s3://bucket.internal.example:9000/tune"}
	r.State.Provenance.SubmittedBy = "alice@build-host-7"
	r.Graphs[0].Toolchain["timing_cache_store"] = "failed: PUT https://bucket.internal.example:9000/tune/cache: refused"
	stmt, err := provenance.Statement(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stmt)
	if err != nil {
		t.Fatal(err)
	}
	for _, local := range []string{"/home/alice", "sign.pem", "bucket.internal.example", "build-host-7", "alice", "submitted_by", "command"} {
		if bytes.Contains(b, []byte(local)) {
			t.Errorf("the Statement records %q:\n%s", local, b)
		}
	}
	for _, kept := range []string{r.State.Provenance.BundleDigest[len("sha256:"):], `"onnxruntime":"1.24.1"`, `"bench_time":"1s"`, `"strategy":"max-throughput"`} {
		if !bytes.Contains(b, []byte(kept)) {
			t.Errorf("the Statement lacks %s, which reproduces the result:\n%s", kept, b)
		}
	}
}

// A layout's attestation: one envelope naming every file by its path in
// the layout, then one per file naming it alone, each signed (go-
// securesystemslib's verifier accepts every line) and each carrying the
// run's provenance; VerifyLayout returns the whole layout's, and refuses
// another layout's attestation as such.
func TestSignLayout(t *testing.T) {
	ctx := context.Background()
	s, v := newKey(t, t.TempDir(), "k", "ed25519")
	files := map[string]string{
		"m_0/1/model.onnx": strings.Repeat("a", 64), "m_1/1/model.onnx": strings.Repeat("b", 64),
		"m_0/config.pbtxt": strings.Repeat("c", 64), "graphs.json": strings.Repeat("e", 64),
	}
	jsonl, err := provenance.SignLayout(ctx, s, testRun(), "triton", files)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(jsonl)), "\n")
	if len(lines) != 1+len(files) {
		t.Fatalf("%d lines, want one for the layout and one per file (%d)", len(lines), 1+len(files))
	}
	k, err := signerverifier.LoadKey(s.PublicPEM())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
	if err != nil {
		t.Fatal(err)
	}
	var single []string
	for i, line := range lines {
		var env dsse.Envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatal(err)
		}
		ev, _ := dsse.NewEnvelopeVerifier(sv)
		if _, err := ev.Verify(ctx, &env); err != nil {
			t.Fatalf("line %d: go-securesystemslib refuses it: %v", i+1, err)
		}
		payload, _ := base64.StdEncoding.DecodeString(env.Payload)
		var st struct {
			Subject []struct {
				Name   string            `json:"name"`
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
			PredicateType string `json:"predicateType"`
		}
		if err := json.Unmarshal(payload, &st); err != nil || st.PredicateType != provenance.PredicateType {
			t.Fatalf("line %d: %v, predicate %q", i+1, err, st.PredicateType)
		}
		if i == 0 {
			if len(st.Subject) != len(files) {
				t.Errorf("the layout's envelope names %d files, want %d", len(st.Subject), len(files))
			}
			continue
		}
		if len(st.Subject) != 1 || files[st.Subject[0].Name] != st.Subject[0].Digest["sha256"] {
			t.Errorf("line %d names %+v, want one file of the layout with its digest", i+1, st.Subject)
		}
		single = append(single, st.Subject[0].Name)
	}
	if want := []string{"graphs.json", "m_0/1/model.onnx", "m_0/config.pbtxt", "m_1/1/model.onnx"}; !reflect.DeepEqual(single, want) {
		t.Errorf("single-file envelopes name %v, want %v", single, want)
	}
	got, err := provenance.VerifyLayout(ctx, "tunefleet.intoto.jsonl", jsonl, []*provenance.Verifier{v}, "triton")
	if err != nil {
		t.Fatalf("VerifyLayout: %v", err)
	}
	if !reflect.DeepEqual(got.Subjects, files) || got.Run() != "m-1" || got.LayoutOf() != "triton" {
		t.Errorf("VerifyLayout: subjects %v, run %q, layout %q", got.Subjects, got.Run(), got.LayoutOf())
	}
	if _, err := provenance.VerifyLayout(ctx, "tunefleet.intoto.jsonl", jsonl, []*provenance.Verifier{v}, "tunefleet"); err == nil ||
		!strings.Contains(err.Error(), "verification failed (digest)") || !strings.Contains(err.Error(), "sign another layout or file") {
		t.Errorf("the triton layout's attestation taken for the tunefleet layout: %v", err)
	}
}
