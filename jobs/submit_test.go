package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
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

// WorkID gives, from the bundle's digest alone, the work id Prepare gives
// the bundle itself, whatever the night; and another setting is another
// work.
func TestWorkIDIsPreparesWork(t *testing.T) {
	t.Parallel()
	b := open(t, bundletest.Write(t, bundletest.WithModel("m")))
	base := submitOptions(t, "max-throughput", "ort:cpu:basic")
	seen := map[string]string{}
	for _, tc := range []struct {
		name string
		edit func(*jobs.SubmitOptions)
	}{
		{"as given", func(*jobs.SubmitOptions) {}},
		{"another bench time", func(o *jobs.SubmitOptions) { o.BenchTime = time.Second }},
		{"the default bench time", func(o *jobs.SubmitOptions) { o.BenchTime = 0 }},
		{"a warm-up", func(o *jobs.SubmitOptions) { o.Warmup = time.Millisecond }},
		{"retry-failed", func(o *jobs.SubmitOptions) { o.RetryFailed = true }},
		{"a baseline", func(o *jobs.SubmitOptions) { o.Baseline = "ort:cpu:basic" }},
		{"another candidate list", func(o *jobs.SubmitOptions) {
			o.Candidates, _ = backend.ParseCandidates("ort:cpu:basic,ort:cpu:all")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			var works []string
			for _, night := range []string{"", "2026-12-01-abc", "2026-12-02-abc"} {
				o.Nightly = night
				p, err := jobs.Prepare(b, o)
				if err != nil {
					t.Fatal(err)
				}
				w, err := jobs.WorkID("m", p.BundleDigest(), o)
				if err != nil {
					t.Fatal(err)
				}
				if w != p.Work() {
					t.Errorf("night %q: WorkID %s, Prepare's %s", night, w, p.Work())
				}
				works = append(works, w)
			}
			if works[0] != works[1] || works[1] != works[2] {
				t.Errorf("nights give other work ids: %q", works)
			}
			if other, ok := seen[works[0]]; ok {
				t.Errorf("the same work id as %q", other)
			}
			seen[works[0]] = tc.name
		})
	}
	bad := base
	bad.Target = ""
	if _, err := jobs.WorkID("m", "sha256:1", bad); err == nil {
		t.Error("WorkID accepted options that do not validate")
	}
}
