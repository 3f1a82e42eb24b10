package storegc_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/storegc"
	"github.com/tunefleet/tunefleet/strategy"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// mlpBundle makes a one-graph bundle with reference outputs from ONNX
// Runtime; seed picks its samples (different seeds: different blobs),
// hidden the MLP's width (different widths: different engines).
func mlpBundle(t *testing.T, model string, seed uint64, hidden int) string {
	t.Helper()
	dir := t.TempDir()
	onnxFile := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(16, hidden, 4).Write(onnxFile); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), onnxFile, out, bundlegen.ONNXOptions{
		Model: model, Ranges: []string{"input:1x16..8x16"}, Samples: 2, Seed: seed, IntHi: 9,
		Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(),
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func submit(t *testing.T, c *jobs.Client, dir string) string {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Parse(strategy.FirstWins, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := backend.ParseCandidates("ort:cpu:basic")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(t.Context(), b, jobs.SubmitOptions{Target: "cpu", Strategy: s, Candidates: cs,
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, BenchTime: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return sub.Run
}

func waitFinal(t *testing.T, runs *runstate.Runs, run string) {
	t.Helper()
	for {
		st, err := runs.Get(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			if st.Status != runstate.RunDone {
				t.Fatalf("run %s: %+v", run, st)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newest is the latest modification time of any object in the store.
func newest(t *testing.T, s artifacts.Store) time.Time {
	t.Helper()
	keys, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var max time.Time
	for _, k := range keys {
		info, err := s.Stat(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if info.ModTime.After(max) {
			max = info.ModTime
		}
	}
	return max
}

// waitPast waits until the store's clock (S3 keeps whole seconds) stamps a
// new object later than t, so that what is written from now on is younger
// than anything written before.
func waitPast(t *testing.T, s artifacts.Store, at time.Time) {
	t.Helper()
	for {
		if err := s.Put(t.Context(), "probe/clock", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		info, err := s.Stat(t.Context(), "probe/clock")
		if err != nil {
			t.Fatal(err)
		}
		if info.ModTime.After(at) {
			s.Delete(t.Context(), "probe/clock")
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gate holds the worker's first attempt result of a run (the manifest that
// names the engine blob it has just uploaded) until the test lets it go:
// gc then runs while a blob exists that nothing names yet.
type gate struct {
	artifacts.Store
	prefix  string // of the run's keys
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (g *gate) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, g.prefix) && strings.Contains(key, "/attempts/") {
		g.once.Do(func() { close(g.held) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Put(ctx, key, r, size)
}

// On versitygw: two runs of a model are done and a third model's run is
// submitted and finalizes while gc collects and sweeps over and over. The
// old run and an orphan go; everything the runs kept need stays, and
// fetching each model's state afterwards verifies every engine.
func TestGCOnS3WithARunFinalizingConcurrently(t *testing.T) {
	orttest.Need(t)
	ctx := t.Context()
	store, err := artifacts.NewS3(testsvc.S3(t))
	if err != nil {
		t.Fatal(err)
	}
	busyDir := mlpBundle(t, "gc.Busy", 3, 24)
	g := &gate{Store: store, prefix: "runs/gc.Busy-", held: make(chan struct{}), release: make(chan struct{})}
	e, err := jobs.StartEmbedded(jobs.WorkerConfig{
		Store: g, Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Queues: []string{"cpu"}, Concurrency: 2,
		WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(e.Redis, store)
	t.Cleanup(func() { c.Close(); e.Close() })
	runs := c.Runs()

	oldRun := submit(t, c, mlpBundle(t, "gc.M", 1, 32))
	waitFinal(t, runs, oldRun)
	keptRun := submit(t, c, mlpBundle(t, "gc.M", 2, 32))
	waitFinal(t, runs, keptRun)
	orphan, err := artifacts.PutBytes(ctx, store, []byte("written by a writer that stopped before its manifest"))
	if err != nil {
		t.Fatal(err)
	}
	oldKeys, err := store.List(ctx, "runs/"+oldRun+"/")
	if err != nil || len(oldKeys) == 0 {
		t.Fatalf("old run's objects %q: %v", oldKeys, err)
	}

	// The gc clock puts everything written so far past the grace period
	// and everything written from now on inside it.
	waitPast(t, store, newest(t, store))
	cutoff := newest(t, store)
	o := storegc.Options{KeepRuns: 1, Grace: storegc.DefaultGrace, Final: runs.Known,
		Now: func() time.Time { return cutoff.Add(storegc.DefaultGrace + time.Nanosecond) }}

	busyRun := submit(t, c, busyDir)
	if !strings.HasPrefix("runs/"+busyRun, g.prefix) {
		t.Fatalf("run id %s does not start with the model name; the gate would never close", busyRun)
	}
	// The worker has uploaded the busy run's engine and waits to write the
	// result that names it: a full collection and sweep now must leave it.
	select {
	case <-g.held:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	p, err := storegc.Collect(ctx, store, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Sweep(ctx, store, o); err != nil {
		t.Fatal(err)
	}
	if p.YoungBlobs == 0 {
		t.Errorf("no young blob while the busy run's engine is unnamed: %+v", p)
	}
	close(g.release)
	sweeps := 1
	for {
		st, err := runs.Get(ctx, busyRun)
		if err != nil {
			t.Fatal(err)
		}
		p, err := storegc.Collect(ctx, store, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			if r.Run != oldRun {
				t.Fatalf("gc would remove run %s (only %s may go)", r.Run, oldRun)
			}
		}
		if _, _, err := p.Sweep(ctx, store, o); err != nil {
			t.Fatal(err)
		}
		sweeps++
		if st.Final() {
			break // one full collection after the run was final
		}
	}
	t.Logf("%d collections while run %s finalized", sweeps, busyRun)

	if keys, _ := store.List(ctx, "runs/"+oldRun+"/"); len(keys) != 0 {
		t.Errorf("old run left %q", keys)
	}
	if _, err := store.Stat(ctx, orphan.Key()); !errors.Is(err, artifacts.ErrNotExist) {
		t.Errorf("orphan blob: %v, want it swept", err)
	}
	for model, run := range map[string]string{"gc.M": keptRun, "gc.Busy": busyRun} {
		got, err := artifacts.Fetch(ctx, store, model, "cpu", "", filepath.Join(t.TempDir(), "deploy"))
		if err != nil {
			t.Fatalf("fetch %s after gc: %v", model, err)
		}
		if got.Run != run || len(got.Engines) != 1 {
			t.Errorf("fetched %s: %+v, want run %s with one engine", model, got, run)
		}
	}
	// Nothing left for a later gc to find but what a kept manifest names.
	p, err = storegc.Collect(ctx, store, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 0 || len(p.Blobs) != 0 {
		t.Errorf("after the sweeps gc still finds %+v", p)
	}
}
