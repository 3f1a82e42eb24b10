package bundle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// Identify gives, without validating, the model, graph count and digest
// Open's bundle has, on bundles of one and several graphs, with external
// data and with a manifest that lists it; what it cannot read is an error.
func TestIdentifyIsOpensDigest(t *testing.T) {
	external := func(t *testing.T) string {
		dir := bundletest.Write(t)
		bundletest.Externalize(t, filepath.Join(dir, onnx0), "weights/mlp.bin", true)
		return dir
	}
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"one graph", func(t *testing.T) string { return bundletest.Write(t, bundletest.WithModel("m")) }},
		{"two graphs, more samples", func(t *testing.T) string {
			return bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs), bundletest.WithSamples(1, 2, 3))
		}},
		{"external data", external},
		{"external data the manifest lists", func(t *testing.T) string {
			dir := external(t)
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].ExternalData = []string{"0/weights/mlp.bin"} })
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			b := mustOpen(t, dir)
			id, err := bundle.Identify(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := bundle.Identity{Model: b.Manifest.Model, Graphs: len(b.Manifest.Graphs), Digest: must(b.Digest())}
			if id != want {
				t.Errorf("Identify = %+v, Open's bundle %+v", id, want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
	}{
		{"no bundle.json", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, bundle.ManifestName)) }},
		{"an unknown field", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, bundle.ManifestName), []byte(`{"format":"x","model":"m","graphz":[]}`))
		}},
		{"no ONNX file", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, onnx0)) }},
		{"a sample missing", func(t *testing.T, dir string) {
			b := mustOpen(t, dir)
			os.Remove(filepath.Join(dir, filepath.FromSlash(b.Manifest.Graphs[0].Samples[0]), "input_0.pb"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			tc.spoil(t, dir)
			if id, err := bundle.Identify(dir); err == nil {
				t.Errorf("Identify = %+v, want an error", id)
			}
		})
	}
}
