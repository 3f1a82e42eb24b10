package storegc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/storegc"
)

// fixture is a store with runs and blobs whose fate the tests know.
type fixture struct {
	store artifacts.Store
	blob  map[string]string // name → blob key
}

func putJSON(t *testing.T, s artifacts.Store, key, doc string) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytesReader(doc), int64(len(doc))); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) newBlob(t *testing.T, name string) string {
	t.Helper()
	ref, err := artifacts.PutBytes(t.Context(), f.store, []byte("blob "+name))
	if err != nil {
		t.Fatal(err)
	}
	f.blob[name] = ref.Key()
	return ref.SHA256
}

// run writes a run: run.json naming its bundle blob, a graph result naming
// its engine blob, and (when final) a state.json.
func (f *fixture) run(t *testing.T, id, model string, submitted time.Time, final bool) {
	t.Helper()
	in, eng := f.newBlob(t, id+"/onnx"), f.newBlob(t, id+"/engine")
	putJSON(t, f.store, artifacts.RunKey(id), fmt.Sprintf(`{"run":%q,"model":%q,"target":"cpu","submitted_at":%q,"files":{"0/model.onnx":{"sha256":%q}}}`,
		id, model, submitted.Format(time.RFC3339Nano), in))
	putJSON(t, f.store, artifacts.GraphAttemptResultKey(id, "0", 1), fmt.Sprintf(`{"engine":"blobs/sha256/%s"}`, eng))
	if final {
		putJSON(t, f.store, artifacts.GraphResultKey(id, "0"), fmt.Sprintf(`{"engine":"blobs/sha256/%s"}`, eng))
		putJSON(t, f.store, artifacts.StateKey(id), fmt.Sprintf(`{"run":%q,"model":%q,"target":"cpu","status":"done"}`, id, model))
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{store: s, blob: map[string]string{}}
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	f.run(t, "m-old", "m", t0, true)
	f.run(t, "m-mid", "m", t0.Add(24*time.Hour), true)
	f.run(t, "m-new", "m", t0.Add(48*time.Hour), true)
	f.run(t, "m-running", "m", t0.Add(72*time.Hour), false)
	f.run(t, "n-old", "n", t0, true)
	// Roots outside runs/: latest.json names a content-addressed state, a
	// history entry, the negative cache and a nightly plan name blobs.
	st := f.newBlob(t, "latest-state")
	putJSON(t, s, artifacts.LatestKey("n", "cpu"), fmt.Sprintf(`{"run":"n-old","state_key":"blobs/sha256/%s","state_sha256":%q}`, st, st))
	putJSON(t, s, "models/m/cpu/history/20261101T020000.000000000Z-m-old.json", fmt.Sprintf(`{"run":"m-old","state_sha256":"sha256:%s"}`, f.newBlob(t, "history-state")))
	putJSON(t, s, "results/cpu/wk.failed/trt:fp16.json", fmt.Sprintf(`{"log":%q}`, f.newBlob(t, "failure-log")))
	putJSON(t, s, "nightly/2026-11-01-abc/plan.json", fmt.Sprintf(`{"fleet_digest":"sha256:%s"}`, f.newBlob(t, "fleet")))
	f.newBlob(t, "orphan")
	return f
}

func later(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

func runIDs(p *storegc.Plan) []string {
	var out []string
	for _, r := range p.Runs {
		out = append(out, r.Run)
	}
	return out
}

func TestCollect(t *testing.T) {
	redisSays := func(final map[string]bool) storegc.FinalFunc {
		return func(_ context.Context, run string) (bool, bool, error) {
			f, known := final[run]
			return known, f, nil
		}
	}
	for _, tc := range []struct {
		name      string
		opts      storegc.Options
		wantRuns  []string
		wantBlobs []string
		young     int
	}{
		{
			name:      "keep one per model",
			opts:      storegc.Options{KeepRuns: 1, Grace: time.Hour, Now: later(2 * time.Hour)},
			wantRuns:  []string{"m-mid", "m-old"}, // n-old is what latest.json names
			wantBlobs: []string{"m-mid/engine", "m-mid/onnx", "m-old/engine", "m-old/onnx", "orphan"},
		},
		{
			name:      "keep two",
			opts:      storegc.Options{KeepRuns: 2, Grace: time.Hour, Now: later(2 * time.Hour)},
			wantRuns:  []string{"m-old"},
			wantBlobs: []string{"m-old/engine", "m-old/onnx", "orphan"},
		},
		{
			name:     "grace keeps young blobs",
			opts:     storegc.Options{KeepRuns: 1, Grace: time.Hour, Now: time.Now},
			wantRuns: []string{"m-mid", "m-old"},
			young:    5,
		},
		{
			name:      "older-than keeps recent runs",
			opts:      storegc.Options{KeepRuns: 0, OlderThan: 3 * time.Hour, Grace: time.Hour, Now: later(2 * time.Hour)},
			wantBlobs: []string{"orphan"},
		},
		{
			name: "redis decides when it knows the run",
			opts: storegc.Options{KeepRuns: 0, Grace: time.Hour, Now: later(2 * time.Hour),
				Final: redisSays(map[string]bool{"m-mid": false, "m-new": true, "m-running": true})},
			wantRuns:  []string{"m-new", "m-old", "m-running"},
			wantBlobs: []string{"m-new/engine", "m-new/onnx", "m-old/engine", "m-old/onnx", "m-running/engine", "m-running/onnx", "orphan"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			p, err := storegc.Collect(t.Context(), f.store, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := runIDs(p); !slices.Equal(got, tc.wantRuns) {
				t.Errorf("runs %q, want %q", got, tc.wantRuns)
			}
			var want []string
			for _, n := range tc.wantBlobs {
				want = append(want, f.blob[n])
			}
			var got []string
			for _, b := range p.Blobs {
				got = append(got, b.Key)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("blobs %q, want %q (%v)", got, want, tc.wantBlobs)
			}
			if p.YoungBlobs != tc.young {
				t.Errorf("young blobs %d, want %d", p.YoungBlobs, tc.young)
			}
			// Collect deletes nothing.
			for _, k := range f.blob {
				if _, err := f.store.Stat(t.Context(), k); err != nil {
					t.Errorf("collect removed %s: %v", k, err)
				}
			}
		})
	}
}

func TestSweepRemovesWhatThePlanSaysAndNothingElse(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	o := storegc.Options{KeepRuns: 1, Grace: time.Hour, Now: later(2 * time.Hour)}
	before, _ := f.store.List(ctx, "")
	p, err := storegc.Collect(ctx, f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	n, bytes, err := p.Sweep(ctx, f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if bytes != p.Bytes || bytes == 0 {
		t.Errorf("swept %d bytes, plan said %d", bytes, p.Bytes)
	}
	after, _ := f.store.List(ctx, "")
	if len(before)-len(after) != n {
		t.Errorf("%d objects gone, sweep says %d", len(before)-len(after), n)
	}
	if keys, _ := f.store.List(ctx, "runs/m-old/"); len(keys) != 0 {
		t.Errorf("m-old left %q", keys)
	}
	for _, keep := range []string{"m-new/engine", "m-running/onnx", "latest-state", "history-state", "failure-log", "fleet"} {
		if _, err := f.store.Stat(ctx, f.blob[keep]); err != nil {
			t.Errorf("%s was swept: %v", keep, err)
		}
	}
	// A second collection finds nothing more to do.
	p2, err := storegc.Collect(ctx, f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Runs) != 0 || len(p2.Blobs) != 0 {
		t.Errorf("second collection: %+v", p2)
	}
}

func TestSweepLeavesABlobWrittenAgainSinceTheCollection(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	p, err := storegc.Collect(ctx, f.store, storegc.Options{Grace: time.Hour, Now: later(2 * time.Hour), KeepRuns: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Blobs) != 1 || p.Blobs[0].Key != f.blob["orphan"] {
		t.Fatalf("plan blobs %+v", p.Blobs)
	}
	// The sweep's clock says now: the orphan, just written, is young.
	if _, _, err := p.Sweep(ctx, f.store, storegc.Options{Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Stat(ctx, f.blob["orphan"]); err != nil {
		t.Errorf("a young blob was swept: %v", err)
	}
}

func TestCollectRejectsNegativeOptions(t *testing.T) {
	f := newFixture(t)
	if _, err := storegc.Collect(t.Context(), f.store, storegc.Options{KeepRuns: -1}); err == nil {
		t.Error("negative keep-runs accepted")
	}
}

// A late duplicate attempt writes into a run already removed: the
// directory it leaves (no run.json, no state.json) goes once it is older
// than the grace period, with the blob it names, unless Redis says the run
// is still going.
func TestCollectRemovesRemnantsOfRemovedRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		now   func() time.Time
		final storegc.FinalFunc
		want  bool
	}{
		{"old", later(2 * time.Hour), nil, true},
		{"young", time.Now, nil, false},
		{"redis says running", later(2 * time.Hour), func(context.Context, string) (bool, bool, error) { return true, false, nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			eng := f.newBlob(t, "late/engine")
			putJSON(t, f.store, artifacts.GraphAttemptResultKey("late", "0", 2), fmt.Sprintf(`{"engine":"blobs/sha256/%s"}`, eng))
			p, err := storegc.Collect(t.Context(), f.store, storegc.Options{KeepRuns: 10, Grace: time.Hour, Now: tc.now, Final: tc.final})
			if err != nil {
				t.Fatal(err)
			}
			gone := slices.Contains(runIDs(p), "late")
			swept := slices.ContainsFunc(p.Blobs, func(o storegc.Object) bool { return o.Key == f.blob["late/engine"] })
			if gone != tc.want || swept != tc.want {
				t.Errorf("remnant removed %v, its blob swept %v; want %v (runs %q)", gone, swept, tc.want, runIDs(p))
			}
		})
	}
}
