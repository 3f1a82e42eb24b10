package tritoncheck

import (
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	onnx "github.com/yalue/onnxruntime_go"
)

// onnxTypes maps ONNX tensor element types to Triton's data types.
var onnxTypes = map[onnx.TensorElementDataType]string{
	1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 4: "TYPE_UINT16", 5: "TYPE_INT16", 6: "TYPE_INT32", 7: "TYPE_INT64",
	8: "TYPE_STRING", 9: "TYPE_BOOL", 10: "TYPE_FP16", 11: "TYPE_FP64", 12: "TYPE_UINT32", 13: "TYPE_UINT64", 16: "TYPE_BF16",
}

var envOnce sync.Once

// ortEnv initializes ONNX Runtime in this process, from the library at
// $ONNXRUNTIME_SHARED_LIBRARY_PATH (what the Makefile exports).
func ortEnv(tb testing.TB) {
	tb.Helper()
	var err error
	envOnce.Do(func() {
		if !onnx.IsInitialized() {
			onnx.SetSharedLibraryPath(os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH"))
			err = onnx.InitializeEnvironment(onnx.WithLogLevelError())
		}
	})
	if err != nil {
		tb.Fatalf("initialize ONNX Runtime: %v", err)
	}
}

// ConfigDims are the full dims of a tensor the config declares, as ONNX
// Runtime reports a model's: the batch axis (-1) first when the model
// batches, an empty reshape meaning the tensor is only that axis.
func ConfigDims(c Config, t Tensor) []int64 {
	dims := t.Dims
	if t.Reshape != nil {
		dims = t.Reshape
	}
	if c.MaxBatchSize > 0 {
		return append([]int64{-1}, dims...)
	}
	return append([]int64{}, dims...)
}

// ONNXModel loads the ONNX model of an onnxruntime_onnx config in a fresh
// ONNX Runtime session, with exactly the input and output names the config
// declares, and checks that ONNX Runtime reports the same names, data
// types and dims (-1 where dynamic) as the config, in the same number.
func ONNXModel(tb testing.TB, modelDir string, c Config) {
	tb.Helper()
	ortEnv(tb)
	path := filepath.Join(modelDir, "1", c.File)
	ins, outs, err := onnx.GetInputOutputInfo(path)
	if err != nil {
		tb.Fatalf("%s: ONNX Runtime cannot read it: %v", path, err)
	}
	compare := func(what string, got []onnx.InputOutputInfo, want []Tensor) []string {
		if len(got) != len(want) {
			tb.Errorf("%s: ONNX Runtime reports %d %ss, the config declares %d", c.Name, len(got), what, len(want))
		}
		byName := map[string]onnx.InputOutputInfo{}
		for _, g := range got {
			byName[g.Name] = g
		}
		var names []string
		for _, w := range want {
			names = append(names, w.Name)
			g, ok := byName[w.Name]
			if !ok {
				tb.Errorf("%s: %s %q of the config is not one of the model's", c.Name, what, w.Name)
				continue
			}
			if dt := onnxTypes[g.DataType]; dt != w.DataType {
				tb.Errorf("%s: %s %s is %s in the model (%d), %s in the config", c.Name, what, w.Name, dt, g.DataType, w.DataType)
			}
			if d := ConfigDims(c, w); !reflect.DeepEqual([]int64(g.Dimensions), d) {
				tb.Errorf("%s: %s %s has dims %v in the model, the config declares %v", c.Name, what, w.Name, []int64(g.Dimensions), d)
			}
		}
		return names
	}
	inNames := compare("input", ins, c.Inputs)
	outNames := compare("output", outs, c.Outputs)
	s, err := onnx.NewDynamicAdvancedSession(path, inNames, outNames, nil)
	if err != nil {
		tb.Fatalf("%s: a fresh ONNX Runtime session with the config's names fails: %v", c.Name, err)
	}
	s.Destroy()
}
