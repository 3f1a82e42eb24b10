package cli_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/state"
)

// writeKeyPair writes a private key (PKCS#8 PEM) and its public key as
// DIR/NAME.pem and DIR/NAME.pub and returns their paths.
func writeKeyPair(t *testing.T, dir, name, alg string) (string, string) {
	t.Helper()
	var priv any
	var pub any
	if alg == "p256" {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, &k.PublicKey
	} else {
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub = k, p
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pder, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	kp, pp := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pp, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o644); err != nil {
		t.Fatal(err)
	}
	return kp, pp
}

// pyVerify runs tunefleet.provenance (python/, Debian's python3-cryptography)
// on what fetch laid out: an independent implementation of DSSE and of the
// signature checks. It returns Python's exit status and output.
func pyVerify(t *testing.T, code string) (int, string) {
	t.Helper()
	py := debianPython(t)
	if out, err := exec.Command(py, "-c", "import cryptography").CombinedOutput(); err != nil {
		t.Fatalf("python3-cryptography is not installed (make python-deps): %v: %s", err, out)
	}
	// tunefleet.provenance alone (it needs only python3-cryptography): the
	// package's __init__ imports torch, which tunefleet.load needs anyway.
	abs, _ := filepath.Abs("../../python")
	path := abs
	if !strings.Contains(code, "from tunefleet import") {
		path = filepath.Join(abs, "tunefleet")
		code = strings.ReplaceAll(code, "from tunefleet.provenance import", "from provenance import")
	}
	cmd := exec.Command(py, "-c", code)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// signedRun tunes a one-graph module with an AITune block into a new
// store, finalize signing with key, and returns the store URL, its
// directory and the run.
func signedRun(t *testing.T, dir, key string) (string, string, string) {
	t.Helper()
	model := filepath.Join(dir, "tanh.onnx")
	f32 := onnxpb.TensorProto_FLOAT
	if err := onnxtest.New("tanh", 13).Input("input_x", f32, "N", 8).Output("output", f32, "N", 8).
		Node("Tanh", []string{"input_x"}, []string{"output"}).Write(model); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", model, "--shape", "input_x:1x8..4x8", "--model", "tests.Tanh", "--out", b).wantCode(t, cli.ExitOK)
	bundletest.EditManifest(t, b, func(m *bundle.Manifest) {
		m.AITune = json.RawMessage(`{"format": "aitune.block/v1", "name": "tanh_module",
		  "forward_signature": {"parameters": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}]},
		  "graphs": {"0": {"inputs": [{"name": "input_x", "path": [["x", "DICT"]]}], "outputs": [{"name": "output", "path": []}]}}}`)
	})
	storeDir := filepath.Join(dir, "store")
	store := "file://" + storeDir
	args := []string{"submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store}
	if key != "" {
		args = append(args, "--sign-key", key)
	}
	producer(t, args...).wantCode(t, cli.ExitOK)
	runs, err := os.ReadDir(filepath.Join(storeDir, "runs"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs in the store: %v %v", runs, err)
	}
	return store, storeDir, runs[0].Name()
}

// The provenance round trip: finalize signs (--sign-key, a rotated key),
// fetch verifies with several verify keys (rotation) in every format and
// lays the envelope out, and Python verifies it independently (its own
// DSSE PAE, python3-cryptography), then refuses a tampered checkpoint file
// and a wrong key before anything is unpickled.
func TestProvenanceRoundTrip(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	_, oldPub := writeKeyPair(t, dir, "old", "p256")
	newKey, newPub := writeKeyPair(t, dir, "new", "ed25519")
	_, otherPub := writeKeyPair(t, dir, "other", "ed25519")
	store, storeDir, run := signedRun(t, dir, newKey)
	// A second run of the same bundle (its graphs reused from the result
	// index) is signed too, and is what fetch resolves.
	o := producer(t, "submit", filepath.Join(dir, "bundle"), "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
		"--bench-time", benchTime, "--store", store, "--sign-key", newKey, "--force")
	o.wantCode(t, cli.ExitOK)
	runs, err := os.ReadDir(filepath.Join(storeDir, "runs"))
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	latest := run
	for _, r := range runs {
		if _, err := os.Stat(filepath.Join(storeDir, "runs", r.Name(), "attestation.intoto.jsonl")); err != nil {
			t.Errorf("run %s is not signed: %v\n%s", r.Name(), err, o.stdout)
		}
		if r.Name() != run {
			latest = r.Name()
		}
	}

	for _, format := range []string{"tunefleet", "aitune", "triton"} {
		out := filepath.Join(dir, "fetch-"+format)
		o := producer(t, "fetch", "tests.Tanh", "--platform", "cpu", "--format", format, "--store", store, "--out", out,
			"--verify-key", oldPub, "--verify-key", newPub)
		o.wantCode(t, cli.ExitOK)
		if !strings.Contains(o.stdout, "signed provenance verified") {
			t.Errorf("%s: fetch does not say it verified:\n%s", format, o.stdout)
		}
		if _, err := os.Stat(filepath.Join(out, cli.AttestationFile)); err != nil {
			t.Errorf("%s: %v", format, err)
		}
	}
	// Python, independently: the state and its engine (tunefleet layout),
	// the checkpoint (aitune layout), with the keys in either order.
	ft := filepath.Join(dir, "fetch-tunefleet")
	if code, out := pyVerify(t, fmt.Sprintf(`
from tunefleet.provenance import verify_state, verify_checkpoint
s = verify_state(%q, open(%q, "rb").read(), [%q, %q])
names = sorted(x["name"] for x in s["subject"])
assert "state.json" in names and "engines/0/model.optimized.onnx" in names, names
assert any(n.startswith("aitune/") for n in names), names
p = s["predicate"]
assert p["buildDefinition"]["externalParameters"]["candidates"] == ["ort:cpu:basic"], p
assert p["runDetails"]["metadata"]["invocationId"] == %q, p
verify_checkpoint(%q, [%q, %q])
print("ok")`, filepath.Join(ft, "state.json"), filepath.Join(ft, cli.AttestationFile), oldPub, newPub, latest,
		filepath.Join(dir, "fetch-aitune"), newPub, oldPub)); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("Python does not verify what Go signed (exit %d):\n%s", code, out)
	}
	ckpt := filepath.Join(dir, "fetch-aitune")
	if code, out := pyVerify(t, fmt.Sprintf(`
from tunefleet.provenance import verify_checkpoint, ProvenanceError
try:
    verify_checkpoint(%q, [%q])
except ProvenanceError as e:
    print("refused:", e)
    raise SystemExit(7)`, ckpt, otherPub)); code != 7 || !strings.Contains(out, "no envelope carries a valid signature by a verify key") {
		t.Errorf("Python with a wrong key (exit %d):\n%s", code, out)
	}
	// A tampered checkpoint file: tunefleet.load refuses before it imports
	// AITune (which is not on this PYTHONPATH: reaching it would fail
	// otherwise) or unpickles anything.
	var sums string
	filepath.Walk(ckpt, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, "state_dict.pt") {
			sums = p
		}
		return nil
	})
	if sums == "" {
		t.Fatal("no state_dict.pt in the fetched checkpoint")
	}
	if err := os.WriteFile(sums, []byte("not the pickle that was signed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(debianPython(t), "-c", "import torch").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but python3-torch is missing (make python-deps): %s", out)
		}
		t.Skipf("python3-torch is not installed (make python-deps): skipping tunefleet.load's refusal")
	}
	if code, out := pyVerify(t, fmt.Sprintf(`
from tunefleet import load
from tunefleet.provenance import ProvenanceError
try:
    load(None, %q, verify_keys=[%q])
except ProvenanceError as e:
    print("refused:", e)
    raise SystemExit(7)`, ckpt, newPub)); code != 7 || !strings.Contains(out, "state_dict.pt has sha256") || !strings.Contains(out, "it was changed") {
		t.Errorf("tunefleet.load of a tampered checkpoint (exit %d):\n%s", code, out)
	}
}

// Each refusal of fetch --verify-key: its message, exit 4 (2 for the
// user's flags and keys), and nothing written.
func TestFetchRefusesUnverifiedProvenance(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	key, pub := writeKeyPair(t, dir, "k", "ed25519")
	_, otherPub := writeKeyPair(t, dir, "other", "p256")
	os.MkdirAll(filepath.Join(dir, "signed"), 0o755)
	os.MkdirAll(filepath.Join(dir, "unsigned"), 0o755)
	signedStore, signedDir, run := signedRun(t, filepath.Join(dir, "signed"), key)
	unsignedStore, _, unsignedRun := signedRun(t, filepath.Join(dir, "unsigned"), "")

	att := filepath.Join(signedDir, "runs", run, "attestation.intoto.jsonl")
	orig, err := os.ReadFile(att)
	if err != nil {
		t.Fatal(err)
	}
	stateKey := filepath.Join(signedDir, "runs", run, "state.json")
	origState, err := os.ReadFile(stateKey)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		os.WriteFile(att, orig, 0o644)
		os.WriteFile(stateKey, origState, 0o644)
	}
	for _, tc := range []struct {
		name   string
		store  string
		args   []string
		tamper func(t *testing.T)
		code   int
		want   []string
		// formats fetched (default: all three)
		formats []string
	}{
		{name: "unsigned run", store: unsignedStore, args: []string{"--verify-key", pub}, code: cli.ExitVerify,
			want: []string{"verification failed (signature)", "there is no signed pointer", "--sign-key", "fetch --run " + unsignedRun}},
		{name: "unsigned run by name", store: unsignedStore, args: []string{"--verify-key", pub, "--run", unsignedRun}, code: cli.ExitVerify,
			want: []string{"verification failed (signature)", "has no signed provenance", "attestation.intoto.jsonl is missing", "--sign-key"}},
		{name: "wrong key", store: signedStore, args: []string{"--verify-key", otherPub}, code: cli.ExitVerify,
			want: []string{"verification failed (key)", "no envelope carries a valid signature by a verify key", otherPub, "it is signed by key id"}},
		{name: "tampered statement", store: signedStore, args: []string{"--verify-key", pub}, code: cli.ExitVerify,
			want: []string{"verification failed (signature)", "no envelope carries a valid signature by a verify key", "the envelope was changed after it was signed"},
			tamper: func(t *testing.T) {
				var env map[string]any
				json.Unmarshal(orig, &env)
				payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
				env["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(`"ort:cpu:basic"`), []byte(`"ort:cpu:all"`), 1))
				b, _ := json.Marshal(env)
				os.WriteFile(att, append(b, '\n'), 0o644)
			}},
		{name: "tampered engine", store: signedStore, args: []string{"--verify-key", pub, "--run", run}, code: cli.ExitVerify,
			want: []string{"verification failed (digest)", "is not the state its signed provenance names", "changed after finalize signed it"},
			tamper: func(t *testing.T) {
				// Someone with write access to the bucket swaps the engine and
				// updates the run's state.json to match: the checksums agree,
				// the signature does not.
				var st state.State
				json.Unmarshal(origState, &st)
				evil := []byte("an engine nobody signed")
				p := filepath.Join(signedDir, "blobs", "sha256", "0000evil")
				os.WriteFile(p, evil, 0o644)
				st.Graphs[0].Engine.SHA256 = sha256hex(evil)
				st.Graphs[0].Engine.Size = int64(len(evil))
				os.Rename(p, filepath.Join(signedDir, "blobs", "sha256", st.Graphs[0].Engine.SHA256))
				b, _ := json.MarshalIndent(st, "", "  ")
				os.WriteFile(stateKey, append(b, '\n'), 0o644)
			}},
		{name: "flipped engine, no key", store: signedStore, args: []string{"--run", run}, code: cli.ExitVerify,
			formats: []string{"tunefleet", "triton"}, // the checkpoint carries its own files
			want:    []string{"verification failed (digest)", "is corrupt or truncated"},
			tamper: func(t *testing.T) {
				// The bytes of a stored engine flipped in place (no signature
				// asked for): the state's digest refuses it, with the
				// verification code, not the service-trouble one.
				var st state.State
				json.Unmarshal(origState, &st)
				p := filepath.Join(signedDir, "blobs", "sha256", st.Graphs[0].Engine.SHA256)
				orig, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				flipped := bytes.Clone(orig)
				flipped[len(flipped)/2] ^= 0xff
				os.WriteFile(p, flipped, 0o644)
				t.Cleanup(func() { os.WriteFile(p, orig, 0o644) })
			}},
		{name: "require without a key", store: signedStore, args: []string{"--require-signature"}, code: cli.ExitUsage,
			want: []string{"--require-signature needs --verify-key"}},
		{name: "not a key", store: signedStore, args: []string{"--verify-key", key}, code: cli.ExitUsage,
			want: []string{"no PEM PUBLIC KEY block"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer restore()
			if tc.tamper != nil {
				tc.tamper(t)
			}
			formats := tc.formats
			if formats == nil {
				formats = []string{"tunefleet", "triton", "aitune"}
			}
			for _, format := range formats {
				out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-")+"-"+format)
				args := append([]string{"fetch", "tests.Tanh", "--platform", "cpu", "--format", format, "--store", tc.store, "--out", out}, tc.args...)
				producer(t, args...).wantError(t, "producer", tc.code, tc.want...)
				wantAbsent(t, out)
			}
		})
	}
}

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// debianPython is the Python the Makefile tests with ($PYTHON, by default
// Debian's /usr/bin/python3, whose python3-cryptography and python3-torch
// the Makefile's PY_DEBS install).
func debianPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if _, err := exec.LookPath(py); err != nil {
		t.Fatalf("%s: %v (set $PYTHON)", py, err)
	}
	return py
}
