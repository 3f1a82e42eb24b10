package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
)

// identityPart writes a one-graph bundle of an Identity node over a
// float32 [1,8], with its reference output recorded by ONNX Runtime (all
// optimizations off, as `producer bundle from-onnx` does): the replay
// engine computes the identity, so the correctness check passes on it.
func identityPart(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	model := filepath.Join(dir, "identity.onnx")
	b := onnxtest.New("identity", 13).
		Input("input", onnxpb.TensorProto_FLOAT, int64(1), int64(8)).
		Output("output", onnxpb.TensorProto_FLOAT, int64(1), int64(8)).
		Node("Identity", []string{"input"}, []string{"output"})
	if err := b.Write(model); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "part")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Samples: 1, Seed: 1, Reference: ort.New(ort.Options{}), WorkDir: tb.TempDir(),
	}); err != nil {
		tb.Fatalf("the identity part bundle: %v", err)
	}
	return out
}

// fleetSettings are the fleet file's defaults the simulator submits with.
type fleetSettings struct {
	// Queues are the night's target classes; model k targets
	// Queues[k % len(Queues)].
	Queues     []string
	Candidates []string
	BenchTime  time.Duration
	Warmup     time.Duration
}

// writeFleet writes models bundles of graphs graphs each and the fleet
// file that lists them, under dir, and returns the fleet file's path.
//
// One bundle of graphs copies of the identity part is merged once; each
// model's bundle is that bundle's files hard-linked (no copy: a 100,000-graph
// fleet is 300,000 links, not 300,000 files of bytes) and a bundle.json of
// its own, whose graphs are named by their index in the whole fleet.
// Graph names are part of a graph's declaration, so every graph has a
// work key of its own and none is reused from another model's result,
// while the files, the same bytes everywhere, are one blob each in the
// store (as a fleet's recordings are not, but the store's cost per
// request is what is measured, not its bytes).
func writeFleet(tb testing.TB, dir string, models, graphs int, s fleetSettings) string {
	tb.Helper()
	part := identityPart(tb)
	parts := make([]string, graphs)
	for i := range parts {
		parts[i] = part
	}
	tmpl := filepath.Join(tb.TempDir(), "template")
	if _, err := bundlegen.Merge(parts, tmpl, "template"); err != nil {
		tb.Fatalf("merge the template bundle: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(tmpl, bundle.ManifestName))
	if err != nil {
		tb.Fatal(err)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatal(err)
	}
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "format: tunefleet.fleet/v1\nclasses: [%s]\ndefaults:\n  targets: [%s]\n  strategy: first-wins\n  candidates: [%s]\n  bench_time: %s\n  warmup: %s\nmodels:\n",
		strings.Join(s.Queues, ", "), s.Queues[0], strings.Join(s.Candidates, ", "), s.BenchTime, s.Warmup)
	for k := range models {
		name := fmt.Sprintf("sim_model_%05d", k)
		bdir := filepath.Join(dir, "bundles", name)
		if err := linkTree(tmpl, bdir); err != nil {
			tb.Fatalf("bundle %s: %v", name, err)
		}
		mm := m
		mm.Model = name
		mm.Graphs = append([]bundle.Graph(nil), m.Graphs...)
		for i := range mm.Graphs {
			mm.Graphs[i].Name = strconv.Itoa(k*graphs + i)
		}
		out, err := json.MarshalIndent(mm, "", " ")
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bdir, bundle.ManifestName), out, 0o644); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&yaml, "  - model: %s\n    bundle: bundles/%s\n", name, name)
		if len(s.Queues) > 1 {
			fmt.Fprintf(&yaml, "    targets: [%s]\n", s.Queues[k%len(s.Queues)])
		}
	}
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(yaml.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// linkTree hard-links every file of src under dest, but bundle.json.
func linkTree(src, dest string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dest, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case rel == bundle.ManifestName:
			return nil
		}
		return os.Link(p, target)
	})
}
