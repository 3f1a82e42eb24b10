package cli_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
)

// breakReference makes sample 0's first reference output wrong, so every
// candidate of graph 0 fails as wrong_answer.
func breakReference(t *testing.T, dir string) {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(b.Manifest.Graphs[0].Samples[0]), "output_0.pb")
	ref, err := bundle.ReadTensorFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(ref.Data))
	binary.LittleEndian.PutUint32(ref.Data, math.Float32bits(v+1))
	data, err := bundle.EncodeTensorProto(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// `submit --force` of a bundle whose candidate gave wrong answers skips it
// (the negative cache) and says why in result.json; --retry-failed builds it.
func TestSubmitRetryFailed(t *testing.T) {
	t.Parallel()
	b := mlpBundle(t)
	breakReference(t, b)
	root := filepath.Join(t.TempDir(), "store")
	skip := func(extra ...string) string {
		t.Helper()
		args := append([]string{"submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
			"--bench-time", benchTime, "--store", "file://" + root, "-o", "json"}, extra...)
		o := producer(t, args...)
		o.wantCode(t, cli.ExitFailed)
		var out struct {
			Submissions []struct {
				Run string `json:"run"`
			} `json:"submissions"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &out); err != nil || len(out.Submissions) != 1 {
			t.Fatalf("submit output: %v\n%s", err, o)
		}
		raw, err := os.ReadFile(filepath.Join(root, "runs", out.Submissions[0].Run, "graphs", "0", "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Results []struct {
				Status     string `json:"status"`
				SkipReason string `json:"skip_reason"`
			} `json:"results"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || len(res.Results) != 1 || res.Results[0].Status != "failed" {
			t.Fatalf("result.json %s: %v", raw, err)
		}
		return res.Results[0].SkipReason
	}
	if r := skip(); r != "" {
		t.Fatalf("first submission skipped the candidate: %q", r)
	}
	if r := skip("--force"); !strings.Contains(r, "negative cache: failed (wrong_answer)") {
		t.Errorf("second submission's skip reason %q, want the negative cache's", r)
	}
	if r := skip("--retry-failed"); r != "" {
		t.Errorf("--retry-failed skipped the candidate: %q", r)
	}
}
