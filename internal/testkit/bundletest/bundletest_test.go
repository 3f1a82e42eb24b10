package bundletest_test

import (
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

func open(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(t *testing.T, dir string) string {
	t.Helper()
	d, err := open(t, dir).Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWriteDefaults(t *testing.T) {
	b := open(t, bundletest.Write(t))
	m := b.Manifest
	if m.Model != bundletest.DefaultModel || len(m.Graphs) != 1 || m.Graphs[0].Name != "0" || m.Graphs[0].ONNX != bundletest.ONNXPath("0") {
		t.Fatalf("manifest %+v", m)
	}
	g := m.Graphs[0]
	in := g.Inputs[0]
	if in.Name != "input" || !slices.Equal(in.Min, []int64{bundletest.DefaultMinBS, bundletest.MLPIn}) ||
		!slices.Equal(in.Max, []int64{bundletest.DefaultMaxBS, bundletest.MLPIn}) {
		t.Errorf("input %+v", in)
	}
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(bundletest.DefaultSampleBatches) {
		t.Fatalf("%d samples", len(samples))
	}
	for i, s := range samples {
		if s.Dir != bundletest.SamplePath("0", i) || s.Inputs[0].Shape[0] != bundletest.DefaultSampleBatches[i] ||
			!slices.Equal(s.Outputs[0].Shape, []int64{bundletest.DefaultSampleBatches[i], bundletest.MLPOut}) {
			t.Errorf("sample %d: %s %v %v", i, s.Dir, s.Inputs[0].Shape, s.Outputs[0].Shape)
		}
		for j := range s.Inputs[0].Len() {
			if v := s.Inputs[0].Float64At(j); !(v >= -1 && v < 1) {
				t.Fatalf("sample %d value %d is %v, want [-1, 1)", i, j, v)
			}
		}
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	opts := []bundletest.Option{bundletest.WithGraphs(bundletest.TwoInputs, bundletest.MLP), bundletest.WithSamples(3, 1)}
	a, b := digest(t, bundletest.Write(t, opts...)), digest(t, bundletest.Write(t, opts...))
	if a != b {
		t.Errorf("two writes with the same options differ: %s, %s", a, b)
	}
	if c := digest(t, bundletest.Write(t, bundletest.WithSamples(3, 2))); c == a {
		t.Error("different options gave the same digest")
	}
}

func TestWriteOptions(t *testing.T) {
	dir := bundletest.Write(t,
		bundletest.WithModel("pkg.Other"),
		bundletest.WithGraphs(bundletest.TwoInputs, bundletest.MLP),
		bundletest.WithBatchRange(2, 32),
		bundletest.WithSamples(2, 32, 5),
		bundletest.WithManifest(func(m *bundle.Manifest) { m.ModuleType = "torch.nn.Module" }),
	)
	b := open(t, dir)
	m := b.Manifest
	if m.Model != "pkg.Other" || m.ModuleType != "torch.nn.Module" || len(m.Graphs) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	two := m.Graphs[0]
	if names := []string{two.Inputs[0].Name, two.Inputs[1].Name, two.Outputs[0].Name, two.Outputs[1].Name}; !slices.Equal(names, []string{"a", "mask", "y", "s"}) {
		t.Errorf("graph 0 tensors %v", names)
	}
	if two.Outputs[1].Rank() != 1 || two.Inputs[0].Min[0] != 2 || two.Inputs[0].Max[0] != 32 {
		t.Errorf("graph 0 declarations %+v", two)
	}
	for _, g := range m.Graphs {
		samples, err := b.Samples(g.Name)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, s := range samples {
			got = append(got, s.Inputs[0].Shape[0])
		}
		if !slices.Equal(got, []int64{2, 32, 5}) {
			t.Errorf("graph %s sample batches %v", g.Name, got)
		}
	}
}

func TestEditManifest(t *testing.T) {
	dir := bundletest.Write(t)
	bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[0].Samples = nil })
	if got := bundletest.ReadManifest(t, dir); got.Graphs[0].Samples != nil {
		t.Fatalf("edit not written: %+v", got.Graphs[0])
	}
	if _, err := bundle.Open(dir); !bundle.IsInvalid(err) {
		t.Errorf("Open after removing the samples: %v", err)
	}
}

func TestFloat32s(t *testing.T) {
	a := bundletest.Float32s("x", []int64{2, 3}, 7)
	if err := a.Validate(); err != nil || a.Len() != 6 || a.DType != bundle.Float32 || a.Name != "x" {
		t.Fatalf("Float32s = %+v, %v", a, err)
	}
	if b := bundletest.Float32s("x", []int64{2, 3}, 7); !slices.Equal(a.Data, b.Data) {
		t.Error("same seed, different values")
	}
	if c := bundletest.Float32s("x", []int64{2, 3}, 8); slices.Equal(a.Data, c.Data) {
		t.Error("different seeds, same values")
	}
	if s := bundletest.Float32s("s", nil, 1); s.Len() != 1 || len(s.Data) != 4 {
		t.Errorf("scalar: %+v", s)
	}
}
