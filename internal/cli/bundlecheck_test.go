package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
)

// TestBundleCheck runs a from-onnx bundle (references from ONNX Runtime)
// through `bundle check`: every sample reproduces; then a reference is
// made wrong and the check names the graph, the sample and the output.
func TestBundleCheck(t *testing.T) {
	needORT(t)
	out := filepath.Join(t.TempDir(), "b")
	producer(t, "bundle", "from-onnx", writeMLP(t), "--shape", "input:1x64..4x64", "--samples", "2", "-o", out).wantCode(t, cli.ExitOK)

	o := producer(t, "bundle", "check", "-o", "json", out)
	o.wantCode(t, cli.ExitOK)
	var rep struct {
		OK     bool `json:"ok"`
		Graphs []struct {
			Name    string `json:"name"`
			Samples []struct {
				Sample  string `json:"sample"`
				Error   string `json:"error"`
				Outputs []struct {
					Name       string   `json:"name"`
					OK         bool     `json:"ok"`
					Shape      []int64  `json:"shape"`
					MaxAbsDiff *float64 `json:"max_abs_diff"`
				} `json:"outputs"`
			} `json:"samples"`
		} `json:"graphs"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, o.stdout)
	}
	if !rep.OK || len(rep.Graphs) != 1 || len(rep.Graphs[0].Samples) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	for _, s := range rep.Graphs[0].Samples {
		if len(s.Outputs) != 1 || !s.Outputs[0].OK || s.Outputs[0].MaxAbsDiff == nil || *s.Outputs[0].MaxAbsDiff != 0 {
			t.Errorf("%s: %+v (the references are ONNX Runtime's own: the difference is 0)", s.Sample, s.Outputs)
		}
	}

	// A reference off by one: exit 1, the sample and output named.
	b, err := bundle.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	rel := b.Manifest.Graphs[0].Samples[1]
	p := filepath.Join(out, filepath.FromSlash(rel), "output_0.pb")
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	ref := samples[1].Outputs[0]
	ref.Data[3] ^= 0x40 // flips the top exponent bit of element 0 (little-endian float32)
	raw, err := bundle.EncodeTensorProto(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	o = producer(t, "bundle", "check", out)
	o.wantCode(t, cli.ExitFailed)
	for _, w := range []string{"graph 0 " + samples[0].Dir + ": ok", "graph 0 " + rel + ": FAIL: check: output \"output\": 1 of 16 elements out of tolerance"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("stdout does not contain %q:\n%s", w, o.stdout)
		}
	}
	if !strings.Contains(o.stderr, "graph 0, "+rel+": the graph does not reproduce the reference") {
		t.Errorf("stderr: %q", o.stderr)
	}
}
