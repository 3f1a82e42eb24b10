//go:build long

package cli_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// CosignEnv names the cosign binary the long tier runs (default
// third_party/bin/cosign, which `make cosign` builds).
const CosignEnv = "TUNEFLEET_COSIGN"

// cosignBin is the cosign binary; the long tier fails without one.
func cosignBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv(CosignEnv)
	if p == "" {
		p = filepath.Join("..", "..", "third_party", "bin", "cosign")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no cosign at %s (%v): `make cosign` builds it, or set $%s", p, err, CosignEnv)
	}
	abs, _ := filepath.Abs(p)
	return abs
}

// fileEnvelope is the envelope of DIR/tunefleet.intoto.jsonl whose
// Statement names rel alone, picked by the signed subject name as the
// documented jq line picks it (cosign matches a file to subjects by
// digest only; the path is the name the envelope signs).
func fileEnvelope(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, deployverify.LayoutAttestationFile))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var env struct {
			Payload string `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Subject []struct {
				Name string `json:"name"`
			} `json:"subject"`
		}
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Subject) == 1 && st.Subject[0].Name == rel {
			p := filepath.Join(t.TempDir(), "envelope.json")
			if err := os.WriteFile(p, sc.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("%s holds no envelope of %s alone", deployverify.LayoutAttestationFile, rel)
	return ""
}

// TestCosignVerifiesFetchedRepository: cosign v2.6.5, a verifier nobody
// here wrote, verifies every file of a fetched Triton repository with the
// envelope its signed path picks (ed25519 and P-256 keys, PKIX PEM as
// tunefleet writes them), and refuses two models swapped inside the
// repository and an edited config.pbtxt.
func TestCosignVerifiesFetchedRepository(t *testing.T) {
	needORT(t)
	cosign := cosignBin(t)
	dir := t.TempDir()
	f32 := onnxpb.TensorProto_FLOAT
	var parts []string
	for _, op := range []string{"Tanh", "Sigmoid"} {
		m := filepath.Join(dir, strings.ToLower(op)+".onnx")
		if err := onnxtest.New(strings.ToLower(op), 13).Input("x", f32, "N", 8).Output("y", f32, "N", 8).
			Node(op, []string{"x"}, []string{"y"}).Write(m); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "part-"+op)
		producer(t, "bundle", "from-onnx", m, "--shape", "x:1x8..4x8", "--out", p).wantCode(t, cli.ExitOK)
		parts = append(parts, p)
	}
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "merge", parts[0], parts[1], "--model", "tests.TwoOps", "--out", b).wantCode(t, cli.ExitOK)

	run := func(t *testing.T, pub, env, file string) (string, error) {
		cmd := exec.Command(cosign, "verify-blob-attestation", "--key", pub, "--type", "slsaprovenance1", "--insecure-ignore-tlog",
			"--signature", env, file)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, alg := range []string{"ed25519", "p256"} {
		t.Run(alg, func(t *testing.T) {
			kd := filepath.Join(dir, alg)
			os.MkdirAll(kd, 0o755)
			key, pub := writeKeyPair(t, kd, "k", alg)
			store := "file://" + filepath.Join(kd, "store")
			producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
				"--bench-time", benchTime, "--store", store, "--sign-key", key).wantCode(t, cli.ExitOK)
			repo := filepath.Join(kd, "repo")
			producer(t, "fetch", "tests.TwoOps", "--platform", "cpu", "--format", "triton", "--store", store, "--out", repo,
				"--verify-key", pub, "--seen", filepath.Join(kd, "seen.json")).wantCode(t, cli.ExitOK)
			files := []string{"graphs.json", "state.json"}
			for _, m := range []string{"tests_TwoOps_0", "tests_TwoOps_1"} {
				files = append(files, m+"/config.pbtxt", m+"/1/model.onnx")
			}
			for _, rel := range files {
				out, err := run(t, pub, fileEnvelope(t, repo, rel), filepath.Join(repo, filepath.FromSlash(rel)))
				if err != nil || !strings.Contains(out, "Verified OK") {
					t.Errorf("cosign on %s: %v\n%s", rel, err, out)
				}
			}
			// Two models swapped, a config edited: each file checked with
			// the envelope of its path is refused.
			m0, m1 := filepath.Join(repo, "tests_TwoOps_0", "1", "model.onnx"), filepath.Join(repo, "tests_TwoOps_1", "1", "model.onnx")
			d0, _ := os.ReadFile(m0)
			d1, _ := os.ReadFile(m1)
			os.WriteFile(m0, d1, 0o644)
			os.WriteFile(m1, d0, 0o644)
			cfg := filepath.Join(repo, "tests_TwoOps_1", "config.pbtxt")
			c, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, bytes.Replace(c, []byte("max_batch_size: 4"), []byte("max_batch_size: 64"), 1), 0o644)
			for _, rel := range []string{"tests_TwoOps_0/1/model.onnx", "tests_TwoOps_1/1/model.onnx", "tests_TwoOps_1/config.pbtxt"} {
				out, err := run(t, pub, fileEnvelope(t, repo, rel), filepath.Join(repo, filepath.FromSlash(rel)))
				if err == nil || strings.Contains(out, "Verified OK") || !strings.Contains(out, "no matching subject digest found") {
					t.Errorf("cosign took %s, swapped or edited (%v):\n%s", rel, err, out)
				}
			}
			producer(t, "verify", repo, "--key", pub).wantError(t, "producer", cli.ExitVerify, "verification failed (digest)", "tests_TwoOps_0/1/model.onnx has sha256")
		})
	}
}
