package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// `submit` measures again when asked to, and only then: --force with the
// same settings reuses the indexed result, a longer --bench-time (the
// advice an unstable figure's footnote gives) and --remeasure measure the
// graph again (issue 30: the longer bench time printed "reused … measured
// by run …").
func TestSubmitMeasuresAgainWhenAsked(t *testing.T) {
	t.Parallel()
	b := mlpBundle(t)
	root := filepath.Join(t.TempDir(), "store")
	for _, tc := range []struct {
		name   string
		extra  []string
		reused bool
	}{
		{"first", []string{"--bench-time", benchTime}, false},
		{"--force, same settings", []string{"--bench-time", benchTime, "--force"}, true},
		{"a longer --bench-time", []string{"--bench-time", "60ms"}, false},
		{"--remeasure", []string{"--bench-time", "60ms", "--remeasure"}, false},
		{"--force after it", []string{"--bench-time", "60ms", "--force"}, true},
	} {
		args := append([]string{"submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "max-throughput",
			"--store", "file://" + root, "-o", "json"}, tc.extra...)
		o := producer(t, args...)
		o.wantCode(t, 0)
		var out struct {
			Submissions []struct {
				Run     string `json:"run"`
				Created bool   `json:"created"`
			} `json:"submissions"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &out); err != nil || len(out.Submissions) != 1 || !out.Submissions[0].Created {
			t.Fatalf("%s: submit output: %v\n%s", tc.name, err, o)
		}
		raw, err := os.ReadFile(filepath.Join(root, "runs", out.Submissions[0].Run, "graphs", "0", "result.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Reused   bool `json:"reused"`
			StopRule struct {
				MaxTime int64 `json:"max_time_ns"`
			} `json:"stop_rule"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		if res.Reused != tc.reused {
			t.Errorf("%s: graph 0 reused %v, want %v (bench time %dns)", tc.name, res.Reused, tc.reused, res.StopRule.MaxTime)
		}
	}
}
