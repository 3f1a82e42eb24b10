package e2e_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// A run submitted with --sign-key to a fleet whose two workers have no
// key (they finalize it) ends signed all the same: submit --wait signs
// its provenance and its latest pointers once it ends, and fetch
// --verify-key then verifies it, pointer included. Without --wait the key
// would be silently ignored, so submit refuses it, uploading nothing.
func TestSubmitSignKeySignsWhatWorkersFinalize(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := modelBundle(t, "e2e.Signed", onnxtest.MLP(64, 32, 8), onnxtest.TwoInputs())
	keyDir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	key := filepath.Join(keyDir, "sign.pem")
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	pubDer, _ := x509.MarshalPKIXPublicKey(priv.Public())
	pub := filepath.Join(keyDir, "sign.pub")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDer}), 0o644)

	code, _, errs := submit(t, s, dir, "--candidates", "ort:cpu:basic", "--sign-key", key)
	if code != 2 || !strings.Contains(errs, "needs --wait") {
		t.Fatalf("submit --sign-key without --wait: exit %d, %s; want 2 and the way that works", code, errs)
	}
	if keys, err := openStore(t, s).List(context.Background(), ""); err != nil || len(keys) != 0 {
		t.Fatalf("the refused submit left %d object(s) in the store (%v): %v", len(keys), err, keys)
	}
	startWorker(t, s)
	startWorker(t, s)
	code, so, errs := submit(t, s, dir, "--candidates", "ort:cpu:basic", "--sign-key", key, "--wait")
	if code != 0 || len(so.Runs) != 1 || so.Runs[0].Status != "done" {
		t.Fatalf("submit --sign-key --wait: exit %d, %+v: %s", code, so.Runs, errs)
	}
	out := filepath.Join(t.TempDir(), "deploy")
	code, stdout, errs := producer(t, s, "fetch", "e2e.Signed", "--platform", s.queue, "--out", out, "--verify-key", pub, "--seen", filepath.Join(keyDir, "seen.json"))
	if code != 0 || !strings.Contains(stdout, "signed provenance verified") || !strings.Contains(stdout, "signed latest pointer verified: sequence 1") {
		t.Fatalf("fetch --verify-key of the run two keyless workers finalized: exit %d\n%s%s", code, stdout, errs)
	}
}
