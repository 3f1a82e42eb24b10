package fleet_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// readsOf records the keys a store was asked to read (Get) while it is
// recording: the real store beneath does the work.
type readsOf struct {
	artifacts.Store
	mu   sync.Mutex
	keys []string
}

func (r *readsOf) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	return r.Store.Get(ctx, key)
}

// take returns the keys read since the last take, sorted.
func (r *readsOf) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Sorted(slices.Values(r.keys))
	r.keys = nil
	return out
}

// TestNightlyCarriesStoredBundlesUnfetched: a fleet whose bundles are in
// the store (the Kubernetes CronJob's shape: bundle: store:bundles/M), on
// a real redis-server and a file store with one CPU worker. Night 1 is
// cold. Night 2 carries both models forward without fetching either
// bundle: what it reads of the store is each model's stored index and
// latest.json (and the plan it looks for; an index pushed before indexes
// counted their graphs adds its bundle.json), no graph or sample file. A
// pushed change to m1 makes m1 a run of its own (its bundle fetched),
// while m0 still carries; OpenCarried fetches and validates m0's bundle,
// as every night did before, and carries the same run. A stored index
// that no longer matches its files is not trusted: the night fails naming
// the index.
func TestNightlyCarriesStoredBundlesUnfetched(t *testing.T) {
	t.Parallel()
	orttest.Need(t)
	ctx := context.Background()
	rdb := ownRedis(t)
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	models := []string{"m0", "m1"}
	push := func(m string, seed uint64) bundlestore.Index {
		t.Helper()
		dir := filepath.Join(root, "bundles", m)
		i := slices.Index(models, m)
		writeBundle(t, dir, m, []graphPart{{onnxtest.MLP(8+i, 16, 4), []string{fmt.Sprintf("input:1x%d..2x%d", 8+i, 8+i)}, seed}})
		b, err := bundle.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		key, err := bundlestore.Push(ctx, store, b)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := bundlestore.ReadIndex(ctx, store, key)
		if err != nil {
			t.Fatal(err)
		}
		return idx
	}
	idx := map[string]bundlestore.Index{}
	for _, m := range models {
		idx[m] = push(m, 1)
	}
	var fl strings.Builder
	fl.WriteString("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\n  bench_time: 50ms\nmodels:\n")
	for _, m := range models {
		fmt.Fprintf(&fl, "  - model: %s\n    bundle: store:bundles/%s\n", m, m)
	}
	fleetF := filepath.Join(root, "fleet.yaml")
	if err := os.WriteFile(fleetF, []byte(fl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &nightlyStack{classes: []string{"cpu"}, rdb: rdb, store: store, fleetF: fleetF, reg: backend.Registry{"ort": ort.New(ort.Options{})}}
	s.startWorker(t)
	runs := runstate.NewRuns(rdb)
	byModel := func(p *state.Plan) map[string]state.PlanEntry {
		out := map[string]state.PlanEntry{}
		for _, e := range p.Entries {
			out[e.Model] = e
		}
		return out
	}
	wait := func(p *state.Plan) {
		t.Helper()
		if _, err := fleet.Wait(ctx, runs, p, 50*time.Millisecond, fleet.NoReport{}); err != nil {
			t.Fatal(err)
		}
	}
	night1, _ := s.submit(t, "2026-12-01")
	wait(night1)
	first := byModel(night1)
	for m, e := range first {
		if e.Outcome != state.OutcomeSubmitted || e.BundleDigest != idx[m].Digest {
			t.Fatalf("night 1 %s: %+v, want submitted with the stored bundle's digest %s", m, e, idx[m].Digest)
		}
	}

	// fetched is whether any file of the bundle but its bundle.json was read.
	fetched := func(reads []string, ix bundlestore.Index) bool {
		for _, f := range ix.Files {
			if f.Path != bundle.ManifestName && slices.Contains(reads, artifacts.BlobKey(f.SHA256)) {
				return true
			}
		}
		return false
	}
	rec := &readsOf{Store: store}
	s.store = rec

	// Night 2: both carried, from three small reads a model.
	night2, _ := s.submit(t, "2026-12-02")
	reads := rec.take()
	var want []string
	for _, m := range models {
		e := byModel(night2)[m]
		if !e.Carried || e.Run != first[m].Run || e.Outcome != state.OutcomeUnchanged || e.Graphs != 1 || e.Reused != 1 || e.BundleDigest != idx[m].Digest {
			t.Errorf("night 2 %s: %+v, want carried from %s", m, e, first[m].Run)
		}
		want = append(want, bundlestore.LatestKey(m), artifacts.LatestKey(m, "cpu"))
	}
	want = append(want, state.PlanKey(night2.Nightly))
	if slices.Sort(want); !slices.Equal(reads, want) {
		t.Errorf("night 2 read %q, want only each model's index and latest.json, and the plan: %q", reads, want)
	}
	// An index pushed before it recorded its graphs: bundle.json is read
	// for them, and nothing else.
	old := idx["m0"]
	old.Graphs = 0
	if err := artifacts.PutJSON(ctx, store, bundlestore.LatestKey("m0"), old); err != nil {
		t.Fatal(err)
	}
	nightOld, _ := s.submit(t, "2026-12-10")
	reads = rec.take()
	manifest := old.Files[slices.IndexFunc(old.Files, func(f bundle.FileDigest) bool { return f.Path == bundle.ManifestName })]
	want = append(want, artifacts.BlobKey(manifest.SHA256))
	want[slices.Index(want, state.PlanKey(night2.Nightly))] = state.PlanKey(nightOld.Nightly)
	if slices.Sort(want); !slices.Equal(reads, want) {
		t.Errorf("with m0's index without graphs, the night read %q, want %q", reads, want)
	}
	if e := byModel(nightOld)["m0"]; !e.Carried || e.Graphs != 1 {
		t.Errorf("m0 of an index without graphs: %+v, want carried, 1 graph", e)
	}

	// A change to m1 pushed: m1 is fetched and makes a run; m0 carries.
	idx["m1"] = push("m1", 2)
	night3, _ := s.submit(t, "2026-12-03")
	reads = rec.take()
	wait(night3)
	es := byModel(night3)
	if e := es["m1"]; e.Carried || e.Outcome != state.OutcomeSubmitted || e.BundleDigest != idx["m1"].Digest {
		t.Errorf("night 3 m1 (changed): %+v, want a run of the new bundle %s", e, idx["m1"].Digest)
	}
	if !fetched(reads, idx["m1"]) {
		t.Errorf("night 3 did not fetch m1's changed bundle: read %q", reads)
	}
	if e := es["m0"]; !e.Carried || e.Run != first["m0"].Run || fetched(reads, idx["m0"]) {
		t.Errorf("night 3 m0: %+v, fetched %v; want carried, not fetched", e, fetched(reads, idx["m0"]))
	}

	// OpenCarried: what every night did before, the same decision.
	night4, _ := s.submitWith(t, "2026-12-04", fleet.Options{OpenCarried: true})
	reads = rec.take()
	for _, m := range models {
		if e := byModel(night4)[m]; !e.Carried || !fetched(reads, idx[m]) {
			t.Errorf("night 4 (OpenCarried) %s: %+v, fetched %v; want carried after a fetch", m, e, fetched(reads, idx[m]))
		}
	}
	if e := byModel(night4)["m1"]; e.Run != es["m1"].Run {
		t.Errorf("night 4 m1 carries %s, want night 3's run %s", e.Run, es["m1"].Run)
	}

	// An index that does not match its files is not trusted: the night
	// refuses it by name instead of carrying on its word.
	bad := idx["m0"]
	bad.Digest = idx["m1"].Digest
	if err := artifacts.PutJSON(ctx, store, bundlestore.LatestKey("m0"), bad); err != nil {
		t.Fatal(err)
	}
	f, err := fleet.Load(fleetF)
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(rdb, store)
	defer c.Close()
	_, _, err = (&fleet.Submitter{Redis: rdb, Store: store, Client: c, Backends: s.reg}).Submit(ctx, f, fleet.Options{Date: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)})
	if err == nil || !strings.Contains(err.Error(), bundlestore.LatestKey("m0")) || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a nightly over an index whose digest is not its files': %v, want an error naming %s and its digest", err, bundlestore.LatestKey("m0"))
	}
}

// TestNightlyRemovesOrphanedFetches: bundles a nightly fetched and could
// not remove (it was killed) are removed by the next nightly that fetches,
// and that nightly leaves none of its own (real redis-server, file store).
// Not parallel: it sets TMPDIR.
func TestNightlyRemovesOrphanedFetches(t *testing.T) {
	orttest.Need(t)
	ctx := context.Background()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rdb := ownRedis(t)
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m0")
	writeBundle(t, dir, "m0", []graphPart{{onnxtest.MLP(8, 16, 4), []string{"input:1x8..2x8"}, 1}})
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundlestore.Push(ctx, store, b); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(tmp, fmt.Sprintf("%s%d-1", bundlestore.TempPrefix, dead.Process.Pid))
	if err := os.MkdirAll(filepath.Join(orphan, "samples"), 0o755); err != nil {
		t.Fatal(err)
	}
	fleetF := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleetF, []byte("format: tunefleet.fleet/v1\nclasses: [cpu]\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: m0\n    bundle: store:bundles/m0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &nightlyStack{classes: []string{"cpu"}, rdb: rdb, store: store, fleetF: fleetF, reg: backend.Registry{"ort": ort.New(ort.Options{})}}
	plan, _ := s.submit(t, "2026-12-01")
	if e := plan.Entries[0]; e.Outcome != state.OutcomeSubmitted {
		t.Fatalf("m0: %+v, want submitted", e)
	}
	left, err := filepath.Glob(filepath.Join(tmp, bundlestore.TempPrefix+"*"))
	if err != nil || len(left) != 0 {
		t.Errorf("after the nightly the temporary directory holds %q (%v), want no fetched bundle", left, err)
	}
}
