package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
)

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"0 2 * * *", true}, {"@daily", true}, {"*/15 * * * *", true},
		{"0 25 * * *", false}, {"0 2 * *", false}, {"nightly", false}, {"", false},
	} {
		if _, err := fleet.ParseSchedule(tc.spec); (err == nil) != tc.ok {
			t.Errorf("ParseSchedule(%q): %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

// TestScheduleTwoReplicas: two producers run the same schedule on one
// Redis; over several ticks the night is submitted once (its runs created
// once, its tasks enqueued once) and every later nightly finds its plan.
func TestScheduleTwoReplicas(t *testing.T) {
	t.Parallel()
	orttest.Need(t)
	rdb := ownRedis(t)
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "m0"), "m0", []graphPart{{onnxtest.MLP(8, 16, 4), []string{"input:1x8..2x8"}, 1}})
	fl := filepath.Join(root, "fleet.yaml")
	os.WriteFile(fl, []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu, cpu.b]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: m0\n    bundle: m0\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No worker: the tasks stay queued, where they can be counted.
	if err := runstate.RegisterPlatforms(ctx, rdb, classes, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	spec, err := fleet.ParseSchedule("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var fresh, repeats int
	enough := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		c := jobs.NewClient(rdb, store)
		defer c.Close()
		sub := &fleet.Submitter{Redis: rdb, Store: store, Client: c, Backends: backend.Registry{"ort": ort.New(ort.Options{})}}
		wg.Go(func() {
			err := fleet.RunSchedule(ctx, rdb, spec, func(ctx context.Context, _ time.Time) {
				f, err := fleet.Load(fl)
				if err != nil {
					t.Error(err)
					return
				}
				_, existed, err := sub.Submit(ctx, f, fleet.Options{Date: date})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if existed {
					repeats++
				} else {
					fresh++
				}
				if fresh+repeats == 4 {
					close(enough)
				}
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	<-enough
	cancel()
	wg.Wait()
	if fresh != 1 {
		t.Errorf("%d nightlies submitted the night afresh, %d found its plan: want exactly one fresh", fresh, repeats)
	}
	if n, _ := rdb.ZCard(context.Background(), "tunefleet:runs").Result(); n != 2 {
		t.Errorf("%d runs recorded, want 2 (one model x two classes)", n)
	}
	held, _ := queued(t, rdb)
	if held != 2 {
		t.Errorf("%d tasks queued, want 2 (one graph per run)", held)
	}
}
