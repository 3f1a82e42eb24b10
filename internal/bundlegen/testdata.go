package bundlegen

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// FromTestData turns a model folder in the ONNX test-data layout (model.onnx
// and test_data_set_*/ with input_<k>.pb and output_<k>.pb) into a one-graph
// bundle at dest. The recorded files are copied unchanged; shape bounds are
// the smallest and largest sizes the data sets use.
func FromTestData(src, dest, model string) (*bundle.Bundle, error) {
	modelPath := filepath.Join(src, "model.onnx")
	io, err := bundle.ReadGraphIO(modelPath)
	if err != nil {
		return nil, fmt.Errorf("from-testdata: %w", err)
	}
	sets, err := filepath.Glob(filepath.Join(src, "test_data_set_*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(sets)
	if len(sets) == 0 {
		return nil, fmt.Errorf("from-testdata: %s has no test_data_set_*/ folders", src)
	}
	if model == "" {
		model = ModelName(filepath.Base(filepath.Clean(src)))
	}
	var samples []bundle.Sample
	for _, set := range sets {
		s := bundle.Sample{Dir: filepath.Base(set)}
		if s.Inputs, err = readSet(set, "input", len(io.Inputs)); err != nil {
			return nil, err
		}
		if s.Outputs, err = readSet(set, "output", len(io.Outputs)); err != nil {
			return nil, err
		}
		samples = append(samples, s)
	}
	g := bundle.Graph{Name: "0", ONNX: "graphs/0/model.onnx"}
	g.Inputs = declsFromSamples(io.Inputs, samples, func(s bundle.Sample) []bundle.Tensor { return s.Inputs }, batchDimNames(io, nil), nil)
	g.Outputs = declsFromSamples(io.Outputs, samples, func(s bundle.Sample) []bundle.Tensor { return s.Outputs }, batchDimNames(io, nil), nil)
	w, err := bundle.NewWriter(dest)
	if err != nil {
		return nil, err
	}
	if err := w.CopyFile(g.ONNX, modelPath); err != nil {
		w.Abort()
		return nil, err
	}
	for _, set := range sets {
		rel := "graphs/0/samples/" + filepath.Base(set)
		g.Samples = append(g.Samples, rel)
		files, _ := filepath.Glob(filepath.Join(set, "*put_*.pb"))
		for _, f := range files {
			if err := w.CopyFile(rel+"/"+filepath.Base(f), f); err != nil {
				w.Abort()
				return nil, err
			}
		}
	}
	return w.Commit(bundle.Manifest{Format: bundle.FormatV1, Model: model, Graphs: []bundle.Graph{g}})
}

func readSet(dir, kind string, want int) ([]bundle.Tensor, error) {
	files, _ := filepath.Glob(filepath.Join(dir, kind+"_*.pb"))
	if len(files) != want {
		return nil, fmt.Errorf("from-testdata: %s has %d %s files, the model has %d %ss", dir, len(files), kind, want, kind)
	}
	out := make([]bundle.Tensor, want)
	for k := range out {
		t, err := bundle.ReadTensorFile(filepath.Join(dir, fmt.Sprintf("%s_%d.pb", kind, k)))
		if err != nil {
			return nil, fmt.Errorf("from-testdata: %w", err)
		}
		out[k] = t
	}
	return out, nil
}

// declsFromSamples declares tensors with the model's names and dtypes, and
// bounds from the recorded shapes. The batch axis of a tensor is the
// first varying axis whose ONNX dim name is one of batchNames; else axis 0
// when it varies; else, when batchOf says each sample's batch (nil: not
// known), the first varying axis whose size is that batch in every sample
// (an unnamed state output [2, N, 128] beside its input). Any other
// varying axis is "dim<i>".
func declsFromSamples(infos []bundle.ValueInfo, samples []bundle.Sample, pick func(bundle.Sample) []bundle.Tensor, batchNames map[string]bool, batchOf func(bundle.Sample) int64) []bundle.TensorDecl {
	out := make([]bundle.TensorDecl, len(infos))
	for k, info := range infos {
		var lo, hi []int64
		for _, s := range samples {
			t := pick(s)[k]
			if lo == nil {
				lo, hi = append([]int64{}, t.Shape...), append([]int64{}, t.Shape...)
				continue
			}
			for i := range t.Shape {
				if i < len(lo) {
					lo[i], hi[i] = min(lo[i], t.Shape[i]), max(hi[i], t.Shape[i])
				}
			}
		}
		varies := func(i int) bool { return i < len(lo) && lo[i] != hi[i] }
		tracks := func(i int) bool {
			if batchOf == nil || !varies(i) {
				return false
			}
			for _, s := range samples {
				if t := pick(s)[k]; i >= len(t.Shape) || t.Shape[i] != batchOf(s) {
					return false
				}
			}
			return true
		}
		ax := 0
		if i := slices.IndexFunc(info.Params, func(p string) bool { return batchNames[p] }); i >= 0 && varies(i) {
			ax = i
		} else if !varies(0) {
			for i := range lo {
				if tracks(i) {
					ax = i
					break
				}
			}
		}
		out[k] = bundle.TensorDecl{TensorSpec: shapes.SpecWithBatchAxis(info.Name, lo, hi, ax), DType: info.DType}
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._()-]+`)

// ModelName makes a model name from any string the way AITune does ('/'
// becomes '_'), also replacing other characters a name may not hold.
func ModelName(s string) string {
	s = strings.ReplaceAll(s, "/", "_")
	s = unsafeName.ReplaceAllString(s, "_")
	s = strings.TrimLeft(s, "._-")
	if s == "" {
		return "model"
	}
	return s
}
