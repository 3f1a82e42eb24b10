package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// A directory fetch laid out verifies on its own: `producer verify DIR
// --key K` needs nothing but DIR and the key, for each layout. Two
// models swapped inside a Triton repository, two engines swapped in the
// tunefleet layout, an edited config.pbtxt or graphs.json, a file added
// or one removed, a tampered checkpoint file and another key are each
// refused with exit 4 and the check that failed.
func TestVerifyFetchedDirectory(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	key, pub := writeKeyPair(t, dir, "k", "ed25519")
	_, otherPub := writeKeyPair(t, dir, "other", "p256")
	// Two graphs of different operators, so that their engines differ.
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
	store := "file://" + filepath.Join(dir, "store")
	producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
		"--bench-time", benchTime, "--store", store, "--sign-key", key).wantCode(t, cli.ExitOK)

	fetched := map[string]string{}
	for _, format := range []string{"tunefleet", "triton"} {
		out := filepath.Join(dir, "fetch-"+format)
		producer(t, "fetch", "tests.TwoOps", "--platform", "cpu", "--format", format, "--store", store, "--out", out, "--verify-key", pub).wantCode(t, cli.ExitOK)
		fetched[format] = out
		if _, err := os.Stat(filepath.Join(out, deployverify.LayoutAttestationFile)); err != nil {
			t.Errorf("%s: fetch --verify-key laid out no attestation of the layout: %v", format, err)
		}
		o := producer(t, "verify", out, "--key", otherPub, "--key", pub)
		o.wantCode(t, cli.ExitOK)
		if !strings.Contains(o.stdout, "verified: "+format+" layout of run tests.TwoOps-") || o.stderr != "" {
			t.Errorf("%s: verify does not say what it verified, or notes something missing:\n%s", format, o)
		}
	}
	// The AITune layout of a one-graph module with an aitune block.
	aitDir := filepath.Join(dir, "ait")
	os.MkdirAll(aitDir, 0o755)
	aitStore, _, _ := signedRun(t, aitDir, key)
	fetched["aitune"] = filepath.Join(dir, "fetch-aitune")
	producer(t, "fetch", "tests.Tanh", "--platform", "cpu", "--format", "aitune", "--store", aitStore, "--out", fetched["aitune"], "--verify-key", pub).wantCode(t, cli.ExitOK)
	producer(t, "verify", fetched["aitune"], "--key", pub).wantCode(t, cli.ExitOK)

	// Each tamper acts on a copy of the fetched directory (base), by
	// slash-separated paths relative to it.
	swap := func(a, b string) func(t *testing.T, base string) {
		return func(t *testing.T, base string) {
			pa, pb := filepath.Join(base, filepath.FromSlash(a)), filepath.Join(base, filepath.FromSlash(b))
			da, err1 := os.ReadFile(pa)
			db, err2 := os.ReadFile(pb)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			os.WriteFile(pa, db, 0o644)
			os.WriteFile(pb, da, 0o644)
		}
	}
	edit := func(rel, old, new string) func(t *testing.T, base string) {
		return func(t *testing.T, base string) {
			p := filepath.Join(base, filepath.FromSlash(rel))
			d, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(d), old) {
				t.Fatalf("%s holds no %q (%v):\n%s", p, old, err, d)
			}
			os.WriteFile(p, []byte(strings.Replace(string(d), old, new, 1)), 0o644)
		}
	}
	for _, tc := range []struct {
		name, layout string
		tamper       func(t *testing.T, base string)
		key          string
		want         []string
	}{
		{name: "models swapped", layout: "triton", tamper: swap("tests_TwoOps_0/1/model.onnx", "tests_TwoOps_1/1/model.onnx"),
			want: []string{"verification failed (digest)", "/1/model.onnx has sha256", "changed or swapped"}},
		{name: "config edited", layout: "triton", tamper: edit("tests_TwoOps_1/config.pbtxt", "max_batch_size: 4", "max_batch_size: 64"),
			want: []string{"verification failed (digest)", "tests_TwoOps_1/config.pbtxt has sha256", "the signed triton layout of run"}},
		{name: "graphs.json edited", layout: "triton", tamper: edit("graphs.json", `"candidate": "ort:cpu:basic"`, `"candidate": "ort:cpu:all"`),
			want: []string{"verification failed (digest)", "graphs.json has sha256"}},
		{name: "file added", layout: "triton", tamper: func(t *testing.T, base string) {
			os.WriteFile(filepath.Join(base, "tests_TwoOps_0", "1", "extra.so"), []byte("x"), 0o644)
		}, want: []string{"verification failed (digest)", "tests_TwoOps_0/1/extra.so is not a subject of the signed triton layout"}},
		{name: "file removed", layout: "triton", tamper: func(t *testing.T, base string) { os.Remove(filepath.Join(base, "tests_TwoOps_1", "config.pbtxt")) },
			want: []string{"verification failed (digest)", "tests_TwoOps_1/config.pbtxt is missing"}},
		{name: "engines swapped", layout: "tunefleet", tamper: swap("engines/0/model.optimized.onnx", "engines/1/model.optimized.onnx"),
			want: []string{"verification failed (digest)", "/model.optimized.onnx has sha256"}},
		{name: "checkpoint file changed", layout: "aitune", tamper: func(t *testing.T, base string) {
			n := 0
			filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
				if err == nil && strings.HasSuffix(p, "state_dict.pt") {
					os.WriteFile(p, []byte("not what was signed"), 0o644)
					n++
				}
				return nil
			})
			if n == 0 {
				t.Fatal("no state_dict.pt in the checkpoint")
			}
		}, want: []string{"verification failed (digest)", "state_dict.pt has sha256"}},
		{name: "another key", layout: "triton", key: otherPub, want: []string{"verification failed (key)", "no envelope carries a valid signature by a verify key"}},
		{name: "another layout's attestation", layout: "triton", tamper: func(t *testing.T, base string) {
			d, err := os.ReadFile(filepath.Join(fetched["tunefleet"], deployverify.LayoutAttestationFile))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(base, deployverify.LayoutAttestationFile), d, 0o644)
		}, want: []string{"verification failed (digest)", "sign another layout or file than the one checked"}},
		// Without the layout's attestation (a run signed before layouts
		// were), the run's own is checked as before.
		{name: "pre-layout config edited", layout: "triton", tamper: func(t *testing.T, base string) {
			os.Remove(filepath.Join(base, deployverify.LayoutAttestationFile))
			edit("tests_TwoOps_1/config.pbtxt", "max_batch_size: 4", "max_batch_size: 64")(t, base)
		}, want: []string{"verification failed (digest)", "tests_TwoOps_1/config.pbtxt is not what the signed state", "generates"}},
		{name: "pre-layout models swapped", layout: "triton", tamper: func(t *testing.T, base string) {
			os.Remove(filepath.Join(base, deployverify.LayoutAttestationFile))
			swap("tests_TwoOps_0/1/model.onnx", "tests_TwoOps_1/1/model.onnx")(t, base)
		}, want: []string{"verification failed (digest)", "/1/model.onnx"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "dir")
			if err := os.CopyFS(cp, os.DirFS(fetched[tc.layout])); err != nil {
				t.Fatal(err)
			}
			producer(t, "verify", cp, "--key", pub).wantCode(t, cli.ExitOK) // the copy verifies
			if tc.tamper != nil {
				tc.tamper(t, cp)
			}
			k := pub
			if tc.key != "" {
				k = tc.key
			}
			producer(t, "verify", cp, "--key", k).wantError(t, "producer", cli.ExitVerify, tc.want...)
		})
	}
	// A run signed before finalize signed each layout (its layouts/
	// removed from the store) still fetches and verifies, saying what it
	// lacks.
	layouts, _ := filepath.Glob(filepath.Join(dir, "store", "runs", "tests.TwoOps-*", "layouts"))
	if len(layouts) != 1 {
		t.Fatalf("the store holds %d runs/*/layouts folders, want 1", len(layouts))
	}
	if err := os.RemoveAll(layouts[0]); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "fetch-old")
	o := producer(t, "fetch", "tests.TwoOps", "--platform", "cpu", "--format", "triton", "--store", store, "--out", old, "--verify-key", pub)
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stderr, "has no signed attestation of the triton layout") {
		t.Errorf("a fetch of a run without layout attestations does not say so:\n%s", o)
	}
	o = producer(t, "verify", old, "--key", pub)
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stderr, "note: "+old+" has no "+deployverify.LayoutAttestationFile) {
		t.Errorf("verify of a directory without the layout's attestation does not say what it lacks:\n%s", o)
	}
	producer(t, "verify", filepath.Join(dir, "nosuch"), "--key", pub).wantError(t, "producer", cli.ExitUsage, "does not exist")
	producer(t, "verify", fetched["triton"]).wantError(t, "producer", cli.ExitUsage, "verify needs --key")
}
