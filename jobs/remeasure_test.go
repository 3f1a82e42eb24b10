package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// TestMeasurementSettingsMeasureAgain: a run that measures otherwise than
// the indexed result (a longer bench time, another warm-up bound) or asks
// for it (--remeasure) measures every graph again, in the worker and when
// skipping before enqueue, and its result supersedes the index entry;
// the same settings again reuse it (unchanged work is never rebuilt).
// Before issue 30 a resubmit with a longer --bench-time reused the
// shorter measurement ("reused … measured by run …"), and nothing but a
// changed bundle made a graph be measured again.
func TestMeasurementSettingsMeasureAgain(t *testing.T) {
	t.Parallel()
	dir := orttest.Bundle(t, "tests.Remeasure",
		orttest.Part{Model: onnxtest.MLP(16, 32, 4), Shapes: []string{"input:1x16..4x16"}},
		orttest.Part{Model: onnxtest.ConvNet(), Shapes: []string{"image:1x3x16x16..2x3x16x16"}})
	env := startEmbedded(t)
	ctx := context.Background()
	platforms, err := runstate.RecentPlatforms(ctx, env.e.Redis, "cpu", time.Now().Add(-time.Hour))
	if err != nil || len(platforms) != 1 {
		t.Fatalf("platforms serving cpu: %v, %v", platforms, err)
	}
	// Steps in order, each on the index the ones before it left.
	steps := []struct {
		name      string
		bench     time.Duration
		warmup    time.Duration
		force     bool
		remeasure bool
		nightly   string // skip before enqueue (ReuseFrom), as a nightly does
		reused    bool   // every graph reused, else every graph measured
		indexed   time.Duration
	}{
		{name: "first run measures", bench: 20 * time.Millisecond, reused: false, indexed: 20 * time.Millisecond},
		{name: "--force with the same settings reuses", bench: 20 * time.Millisecond, force: true, reused: true, indexed: 20 * time.Millisecond},
		{name: "a longer bench time measures again", bench: 60 * time.Millisecond, reused: false, indexed: 60 * time.Millisecond},
		{name: "the longer bench time again reuses", bench: 60 * time.Millisecond, nightly: "n1", reused: true, indexed: 60 * time.Millisecond},
		{name: "another warm-up bound measures again", bench: 60 * time.Millisecond, warmup: 5 * time.Millisecond, reused: false, indexed: 60 * time.Millisecond},
		{name: "--remeasure measures again", bench: 60 * time.Millisecond, warmup: 5 * time.Millisecond, remeasure: true, reused: false, indexed: 60 * time.Millisecond},
		{name: "a nightly with the shorter bench time measures again", bench: 20 * time.Millisecond, nightly: "n2", reused: false, indexed: 20 * time.Millisecond},
		{name: "a nightly with --remeasure's settings after it measures again", bench: 60 * time.Millisecond, warmup: 5 * time.Millisecond, nightly: "n3", reused: false, indexed: 60 * time.Millisecond},
		{name: "the same nightly settings another night reuse", bench: 60 * time.Millisecond, warmup: 5 * time.Millisecond, nightly: "n4", reused: true, indexed: 60 * time.Millisecond},
	}
	var runs []string
	for _, s := range steps {
		o := submitOptions(t, strategy.MaxThroughput, "ort:cpu:basic")
		o.BenchTime, o.Warmup, o.Force, o.Remeasure, o.Nightly = s.bench, s.warmup, s.force, s.remeasure, s.nightly
		if s.nightly != "" {
			o.ReuseFrom = platforms
		}
		sub, err := env.client.Submit(ctx, open(t, dir), o)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !sub.Created || slices.Contains(runs, sub.Run) {
			t.Fatalf("%s: submission %+v is not a new run (runs so far %v)", s.name, sub, runs)
		}
		runs = append(runs, sub.Run)
		st := wait(t, env.client.Runs(), sub.Run)
		if st.Status != runstate.RunDone {
			t.Fatalf("%s: run %+v", s.name, st)
		}
		var spec jobs.RunSpec
		if err := artifacts.GetJSON(ctx, env.store, artifacts.RunKey(sub.Run), &spec); err != nil {
			t.Fatal(err)
		}
		for g, gs := range st.Graphs {
			if got := strings.HasPrefix(gs.Reason, "reused: "); got != s.reused {
				t.Errorf("%s: graph %s reused %v (%q), want %v", s.name, g, got, gs.Reason, s.reused)
			}
			idx, err := resultOf(ctx, env, platforms[0], spec.WorkKeys[g])
			if err != nil {
				t.Fatalf("%s: graph %s: %v", s.name, g, err)
			}
			if idx.StopRule.MaxTime != s.indexed {
				t.Errorf("%s: graph %s indexed with bench time %s, want %s", s.name, g, idx.StopRule.MaxTime, s.indexed)
			}
			// The index names the run that measured: this one, unless it reused.
			if measuredBy := idx.Run; !s.reused && measuredBy != sub.Run {
				t.Errorf("%s: graph %s's index entry was measured by run %s, want it superseded by %s", s.name, g, measuredBy, sub.Run)
			}
		}
		if s.nightly != "" && (sub.Reused == 2) != s.reused {
			t.Errorf("%s: %d graph(s) completed before enqueue, want reuse %v", s.name, sub.Reused, s.reused)
		}
	}
}

// resultOf reads the index entry of a work key on a platform.
func resultOf(ctx context.Context, env *env, platform, workKey string) (*tuner.Result, error) {
	var res tuner.Result
	err := artifacts.GetJSON(ctx, env.store, artifacts.ResultIndexKey(platform, workKey), &res)
	return &res, err
}
