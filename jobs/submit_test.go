package jobs_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/jobs"
)

func TestRunIDIsDeterministic(t *testing.T) {
	t.Parallel()
	a := jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "")
	b := jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "")
	if a != b || !strings.HasPrefix(a, "m-") {
		t.Fatalf("%s != %s", a, b)
	}
	for _, other := range []string{
		jobs.RunID("m", "sha256:2", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "gpu.h100", "max-throughput", 0, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "latency-budget", 5, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:all"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "force"),
	} {
		if other == a {
			t.Fatalf("a different submission got the same run id %s", a)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"cpu", "gpu.h100", "gpu.rtx-3090", "e2e_x"} {
		if err := jobs.CheckTarget(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "GPU", "gpu{h100}", "a b", "-x", strings.Repeat("x", 65)} {
		if err := jobs.CheckTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
