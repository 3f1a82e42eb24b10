package bundle_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

func FuzzParseManifest(f *testing.F) {
	for _, opts := range [][]bundletest.Option{
		nil,
		{bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs)},
	} {
		dir := bundletest.Write(f, opts...)
		f.Add(readFileTB(f, filepath.Join(dir, bundle.ManifestName)))
	}
	for _, s := range []string{
		``, `{`, `null`, `[]`, `"x"`, `{}`, `{} {}`, `{"format":1}`,
		`{"format":"tunefleet.bundle/v1","model":"m","graphs":[]}`,
		`{"format":"tunefleet.bundle/v1","model":"m","graphz":[]}`,
		`{"graphs":[{"name":"0","inputs":[{"name":"x","dtype":"float32","shape":["batch0",3,""],"min_shape":[1,3],"max_shape":[8,3]}]}]}`,
		`{"graphs":[{"inputs":[{"shape":[-1, 1.5, null, true]}]}]}`,
		`{"dynamic_shapes":{"x":[{"name":"N","min":1,"max":8,"batch":true},3,{"name":""},{"nam":"N"}]}}`,
		`{"dynamic_shapes":{"x":[1e3]}}`,
		`{"graphs":[{"tolerances":{"y":{"atol":-1,"rtol":1e400}}}]}`,
		`{"aitune":{"forward_signature":["x"]},"aitune":null}`,
		"{\"model\":\"\xff\xfe\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := bundle.ParseManifest(data)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed manifest: %v\ninput: %q", err, data)
		}
		again, err := bundle.ParseManifest(out)
		if err != nil {
			t.Fatalf("ParseManifest(Marshal(m)): %v\ninput: %q\nmarshalled: %s", err, data, out)
		}
		out2, err := again.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("Marshal is not stable:\n%s\n%s", out, out2)
		}
	})
}

func FuzzDecodeTensorProto(f *testing.F) {
	for _, dt := range allDTypes {
		for _, shape := range [][]int64{{}, {0}, {2, 3}} {
			b, err := bundle.EncodeTensorProto(patterned(dt, shape...))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			f.Add(b[:len(b)/2])
		}
	}
	ext := onnxpb.TensorProto_EXTERNAL
	for _, tp := range []*onnxpb.TensorProto{
		{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{2}, FloatData: []float32{1, 2}},
		{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{1 << 29}, FloatData: []float32{1}},
		{DataType: dtype(onnxpb.TensorProto_FLOAT16), Dims: []int64{2}, Int32Data: []int32{0x3c00, -1}},
		{DataType: dtype(onnxpb.TensorProto_BOOL), Dims: []int64{3}, Int32Data: []int32{1, 0, 2}},
		{DataType: dtype(onnxpb.TensorProto_INT64), Dims: []int64{1}, Int64Data: []int64{-1}},
		{DataType: dtype(onnxpb.TensorProto_UINT32), Dims: []int64{1}, Uint64Data: []uint64{1 << 40}},
		{DataType: dtype(onnxpb.TensorProto_DOUBLE), Dims: []int64{2, 0}, DoubleData: []float64{1}},
		{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{1}, DataLocation: &ext},
		{DataType: dtype(onnxpb.TensorProto_STRING), Dims: []int64{1}, StringData: [][]byte{[]byte("s")}},
		{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{-1}},
		{DataType: dtype(onnxpb.TensorProto_UINT8), Dims: []int64{1 << 62, 1 << 62}, RawData: []byte{1}},
	} {
		b, err := proto.Marshal(tp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("not a tensor"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tensor, err := bundle.DecodeTensorProto(data)
		if err != nil {
			return
		}
		if err := tensor.Validate(); err != nil {
			t.Fatalf("decoded tensor is invalid: %v", err)
		}
		b, err := bundle.EncodeTensorProto(tensor)
		if err != nil {
			t.Fatalf("encode a decoded tensor: %v", err)
		}
		back, err := bundle.DecodeTensorProto(b)
		if err != nil {
			t.Fatalf("decode an encoded tensor: %v", err)
		}
		if back.Name != tensor.Name || back.DType != tensor.DType || !slices.Equal(back.Shape, tensor.Shape) || !bytes.Equal(back.Data, tensor.Data) {
			t.Fatalf("round trip: %s %s%v %x → %s %s%v %x", tensor.Name, tensor.DType, tensor.Shape, tensor.Data, back.Name, back.DType, back.Shape, back.Data)
		}
	})
}

func FuzzParseGraphIO(f *testing.F) {
	for _, b := range []*onnxtest.Builder{onnxtest.MLP(4, 8, 3), onnxtest.TwoInputs(), onnxtest.ConvNet()} {
		data := b.Bytes()
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("ir_version: 8"))
	f.Add([]byte{0x08, 0x08, 0x3a, 0x00}) // ir_version 8, empty graph
	f.Fuzz(func(t *testing.T, data []byte) {
		io, err := bundle.ParseGraphIO(data)
		if err != nil {
			return
		}
		if io.IRVersion <= 0 || len(io.Outputs) == 0 {
			t.Fatalf("accepted a model with ir_version %d and %d outputs", io.IRVersion, len(io.Outputs))
		}
		for _, v := range append(append([]bundle.ValueInfo{}, io.Inputs...), io.Outputs...) {
			if !v.DType.Valid() {
				t.Fatalf("%q has dtype %q", v.Name, v.DType)
			}
			if v.RankKnown() && len(v.Params) != len(v.Dims) {
				t.Fatalf("%q: %d dims, %d params", v.Name, len(v.Dims), len(v.Params))
			}
			for _, d := range v.Dims {
				if d < -1 {
					t.Fatalf("%q: dim %d", v.Name, d)
				}
			}
		}
	})
}

func readFileTB(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
