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
		{"ppocrv4_rec.onnx", nil},
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
