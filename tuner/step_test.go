package tuner_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// recorder keeps the steps an Observer hears (from two goroutines).
type recorder struct {
	mu    sync.Mutex
	steps []tuner.Step
}

func (r *recorder) observe(s tuner.Step) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

// phases lists, per candidate, its phase starts and ends as "build",
// "build done", ..., dropping the benchmark's batch and call steps.
func (r *recorder) phases() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, s := range r.steps {
		if s.BatchSize != 0 {
			continue
		}
		name := string(s.Phase)
		if s.Done {
			name += " done"
		}
		out[s.Candidate] = append(out[s.Candidate], name)
	}
	return out
}

// Every candidate's phases are heard in order, ended whether they passed
// or not; a benchmark's batch sizes and its timed calls are heard as ORT's
// session child measures them (issue 12: `worker tune` shows the candidate,
// batch size and calls so far; the worker's phase histograms).
func TestObserverHearsEveryPhase(t *testing.T) {
	tests := []struct {
		name    string
		perturb bool
		want    []string
	}{
		{"passing", false, []string{"build", "build done", "check", "check done", "benchmark", "benchmark done"}},
		{"wrong answer", true, []string{"build", "build done", "check", "check done"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := realBundle(t)
			if tt.perturb {
				perturb(t, dir, "1", 0.5)
			}
			opts := quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended")
			// Never stable: each batch size measures for MaxTime, long
			// enough for the child to report calls while it runs.
			opts.StopRule.MaxCV, opts.StopRule.MaxSamples, opts.StopRule.MaxTime = 1e-12, 1<<30, 600*time.Millisecond
			var rec recorder
			opts.Observe = rec.observe
			if _, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", t.TempDir(), opts); err != nil {
				t.Fatal(err)
			}
			got := rec.phases()
			for i, c := range []string{"ort:cpu:basic", "ort:cpu:extended"} {
				if !slices.Equal(got[c], tt.want) {
					t.Errorf("%s: phases %v, want %v", c, got[c], tt.want)
				}
				for _, s := range rec.steps {
					if s.Candidate == c && (s.Index != i || s.Count != 2 || s.Graph != "0") {
						t.Errorf("%s: step %+v, want candidate %d of 2 of graph 0", c, s, i)
					}
					if s.Done && s.Elapsed <= 0 {
						t.Errorf("%s: ended step without its duration: %+v", c, s)
					}
				}
			}
			if tt.perturb {
				return
			}
			batches, maxCalls := map[int]bool{}, 0
			for _, s := range rec.steps {
				if s.BatchSize != 0 {
					batches[s.BatchSize] = true
					maxCalls = max(maxCalls, s.Calls)
				}
			}
			if !batches[1] || !batches[4] || maxCalls == 0 {
				t.Errorf("benchmark steps: batch sizes %v, most calls heard %d; want batches 1 and 4 with calls", batches, maxCalls)
			}
		})
	}
}
