package bundle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// entries lists a directory's names (hidden staging directories included).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// stageMLP writes an MLP model and one sample of batch 2 into w and returns
// the manifest that describes them.
func stageMLP(t *testing.T, w *bundle.Writer) bundle.Manifest {
	t.Helper()
	src := bundletest.Write(t)
	m := bundletest.ReadManifest(t, src)
	m.Graphs[0].Samples = m.Graphs[0].Samples[:1]
	if err := w.CopyFile(onnx0, filepath.Join(src, onnx0)); err != nil {
		t.Fatal(err)
	}
	samples, err := mustOpen(t, src).Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSample(sample0, samples[0]); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriterCommit(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "b")
	w, err := bundle.NewWriter(dest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("the destination exists before Commit: %v", err)
	}
	m := stageMLP(t, w)
	b, err := w.Commit(m)
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir != dest {
		t.Errorf("Commit returned a bundle at %s, want %s", b.Dir, dest)
	}
	if got := entries(t, parent); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after Commit the parent holds %q, want only the bundle", got)
	}
	reopened := mustOpen(t, dest)
	if d1, d2 := must(b.Digest()), must(reopened.Digest()); d1 != d2 {
		t.Errorf("digest of the committed bundle %s differs on reopening: %s", d1, d2)
	}
}

// Rewriting a bundle's samples and manifest through a Writer reproduces it
// byte for byte.
func TestWriterReproducesBundle(t *testing.T) {
	src := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
	b := mustOpen(t, src)
	w, err := bundle.NewWriter(filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range b.Manifest.Graphs {
		if err := w.CopyFile(g.ONNX, filepath.Join(src, g.ONNX)); err != nil {
			t.Fatal(err)
		}
		samples, err := b.Samples(g.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			if err := w.WriteSample(s.Dir, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp, err := w.Commit(b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := must(b.Digest()), must(cp.Digest()); d1 != d2 {
		t.Errorf("copy has digest %s, original %s", d2, d1)
	}
}

func TestWriterCommitInvalidLeavesNothing(t *testing.T) {
	tests := []struct {
		name  string
		brk   func(m *bundle.Manifest)
		want  string
		isInv bool
	}{
		{"wrong format", func(m *bundle.Manifest) { m.Format = "v0" }, `format: is "v0", want "tunefleet.bundle/v1"`, true},
		{"missing sample", func(m *bundle.Manifest) { m.Graphs[0].Samples = append(m.Graphs[0].Samples, "0/nope") }, `path "0/nope" does not exist`, true},
		{"dtype mismatch", func(m *bundle.Manifest) { m.Graphs[0].Outputs[0].DType = bundle.Float64 }, "declared float64", true},
		{"manifest that cannot be marshalled", func(m *bundle.Manifest) { m.AITune = json.RawMessage("{") }, "RawMessage", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "b")
			w, err := bundle.NewWriter(dest)
			if err != nil {
				t.Fatal(err)
			}
			m := stageMLP(t, w)
			tt.brk(&m)
			_, err = w.Commit(m)
			if err == nil {
				t.Fatal("Commit of an invalid bundle succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error does not say %q: %v", tt.want, err)
			}
			if tt.isInv && !strings.Contains(err.Error(), "the bundle written for "+dest+" does not validate") {
				t.Errorf("error does not name the destination: %v", err)
			}
			if bundle.IsInvalid(err) != tt.isInv {
				t.Errorf("IsInvalid(%v) = %v", err, !tt.isInv)
			}
			if got := entries(t, parent); len(got) != 0 {
				t.Errorf("a failed Commit left %q behind", got)
			}
		})
	}
}

func TestNewWriter(t *testing.T) {
	t.Run("non-empty directory", func(t *testing.T) {
		dest := t.TempDir()
		writeFile(t, filepath.Join(dest, "keep.txt"), []byte("mine"))
		if _, err := bundle.NewWriter(dest); err == nil || !strings.Contains(err.Error(), "already exists and is not empty") {
			t.Fatalf("NewWriter on a non-empty directory: %v", err)
		}
		if got := entries(t, dest); !slices.Equal(got, []string{"keep.txt"}) {
			t.Errorf("the directory now holds %q", got)
		}
		if got := entries(t, filepath.Dir(dest)); len(got) != 1 {
			t.Errorf("NewWriter left a staging directory: %q", got)
		}
	})
	t.Run("existing file", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "f")
		writeFile(t, dest, []byte("x"))
		if _, err := bundle.NewWriter(dest); err == nil {
			t.Fatal("NewWriter on a file succeeded")
		}
		if string(readFile(t, dest)) != "x" {
			t.Error("the file changed")
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "empty")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := bundle.NewWriter(dest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(stageMLP(t, w)); err != nil {
			t.Fatal(err)
		}
		mustOpen(t, dest)
	})
	t.Run("missing parents are created", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "a", "b", "c")
		w, err := bundle.NewWriter(dest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(stageMLP(t, w)); err != nil {
			t.Fatal(err)
		}
		mustOpen(t, dest)
	})
}

func TestWriterAbort(t *testing.T) {
	parent := t.TempDir()
	w, err := bundle.NewWriter(filepath.Join(parent, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("0/model.onnx", onnxtest.MLP(2, 2, 2).Bytes()); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if got := entries(t, parent); len(got) != 0 {
		t.Errorf("Abort left %q", got)
	}
}

func TestWriterRejectsUncleanPaths(t *testing.T) {
	parent := t.TempDir()
	w, err := bundle.NewWriter(filepath.Join(parent, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, rel := range []string{"", "..", "../x", "a/../../x", "a/../b", "./a", "/abs", "a//b", "a/"} {
		if err := w.WriteFile(rel, []byte("x")); err == nil || !strings.Contains(err.Error(), "not a clean relative path") {
			t.Errorf("WriteFile(%q) = %v", rel, err)
		}
		if err := w.WriteTensor(rel, bundletest.Float32s("x", []int64{1}, 1)); err == nil {
			t.Errorf("WriteTensor(%q) succeeded", rel)
		}
	}
	if err := w.WriteTensor("t.pb", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{2}, Data: []byte{1}}); err == nil {
		t.Error("WriteTensor of an invalid tensor succeeded")
	}
	if err := w.CopyFile("m.onnx", filepath.Join(parent, "nope")); err == nil {
		t.Error("CopyFile of a missing file succeeded")
	}
	if got := entries(t, parent); len(got) != 1 {
		t.Errorf("writes escaped the staging directory: %q", got)
	}
}
