package tuner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// A model whose weights are ONNX external data tunes with ONNX Runtime,
// also from a copy holding only the graph's files (Paths) and its manifest,
// which is what a queue worker downloads (issue 8, item 7: the external
// data was not uploaded, and the worker failed).
func TestExternalDataTunes(t *testing.T) {
	src := realBundle(t)
	bundletest.Externalize(t, filepath.Join(src, "graphs", "0", "model.onnx"), "model.onnx.data", true)
	b := open(t, src)
	g, _ := b.Manifest.Graph("0")
	const ext = "graphs/0/model.onnx.data"
	if !slices.Contains(g.Paths(), ext) {
		t.Fatalf("Paths() = %v, want %s in it", g.Paths(), ext)
	}
	// The worker's copy: the graph's files and the manifest, nothing else.
	dir := filepath.Join(t.TempDir(), "copy")
	for _, rel := range g.Paths() {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bundletest.WriteManifest(t, dir, b.Manifest) // with external_data, as run.json carries it
	strat, _ := strategy.Parse(strategy.FirstWins, 0)
	cands, _ := backend.ParseCandidates("ort:cpu:basic")
	rule := backend.DefaultStopRule()
	rule.MaxTime = 20 * time.Millisecond
	for _, d := range []string{src, dir} {
		res, err := tuner.TuneGraph(context.Background(), open(t, d), "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
			Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Strategy: strat, Candidates: cands, StopRule: rule,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() {
			t.Fatalf("%s: no winner: %+v %+v", d, res.Failure, res.Results)
		}
		if !slices.ContainsFunc(res.Inputs, func(f bundle.FileDigest) bool { return f.Path == ext }) {
			t.Errorf("result inputs %v do not list %s", res.Inputs, ext)
		}
	}
	// Without the external data file the copy does not open.
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(ext))); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Open(dir); err == nil {
		t.Error("a bundle whose external data is missing opens")
	}
}
