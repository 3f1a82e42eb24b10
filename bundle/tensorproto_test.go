package bundle_test

import (
	"bytes"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

var allDTypes = []bundle.DType{
	bundle.Float32, bundle.Float16, bundle.BFloat16, bundle.Float64,
	bundle.Int8, bundle.Uint8, bundle.Int16, bundle.Uint16,
	bundle.Int32, bundle.Uint32, bundle.Int64, bundle.Uint64, bundle.Bool,
}

// patterned returns a tensor whose bytes are a deterministic pattern (0/1
// for bools).
func patterned(dt bundle.DType, shape ...int64) bundle.Tensor {
	n := bundle.NumElements(shape) * int64(dt.Size())
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*37 + 11)
		if dt == bundle.Bool {
			data[i] = byte(i % 2)
		}
	}
	return bundle.Tensor{Name: "t_" + string(dt), DType: dt, Shape: shape, Data: data}
}

func sameTensor(t *testing.T, got, want bundle.Tensor) {
	t.Helper()
	if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("got %s %s%v (%d bytes), want %s %s%v (%d bytes)",
			got.Name, got.DType, got.Shape, len(got.Data), want.Name, want.DType, want.Shape, len(want.Data))
	}
}

func TestTensorProtoRoundTrip(t *testing.T) {
	shapes := [][]int64{{}, {0}, {2, 0, 3}, {5}, {2, 3, 4}}
	for _, dt := range allDTypes {
		for _, shape := range shapes {
			in := patterned(dt, shape...)
			t.Run(string(dt)+"/"+fmtShape(shape), func(t *testing.T) {
				b, err := bundle.EncodeTensorProto(in)
				if err != nil {
					t.Fatal(err)
				}
				out, err := bundle.DecodeTensorProto(b)
				if err != nil {
					t.Fatal(err)
				}
				if out.Shape == nil || out.Data == nil {
					t.Errorf("decoded shape %v / data %v must be non-nil, even when empty", out.Shape, out.Data)
				}
				sameTensor(t, out, in)
				if err := out.Validate(); err != nil {
					t.Error(err)
				}
				// Encoding is deterministic.
				b2, err := bundle.EncodeTensorProto(out)
				if err != nil || !bytes.Equal(b, b2) {
					t.Errorf("re-encoding differs (err %v)", err)
				}
				// The ONNX type travels.
				var tp onnxpb.TensorProto
				if err := proto.Unmarshal(b, &tp); err != nil {
					t.Fatal(err)
				}
				if tp.GetDataType() != int32(dt.ONNX()) {
					t.Errorf("data_type %d, want %d", tp.GetDataType(), dt.ONNX())
				}
			})
		}
	}
}

func fmtShape(s []int64) string {
	if len(s) == 0 {
		return "scalar"
	}
	var parts []string
	for _, v := range s {
		parts = append(parts, string(rune('0'+v)))
	}
	return strings.Join(parts, "x")
}

func dtype(d onnxpb.TensorProto_DataType) *int32 { v := int32(d); return &v }

func marshal(t *testing.T, tp *onnxpb.TensorProto) []byte {
	t.Helper()
	b, err := proto.Marshal(tp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeTypedFields(t *testing.T) {
	f16 := func(v float32) int32 { return int32(float16.Fromfloat32(v).Bits()) }
	bf16 := func(v float32) int32 { return int32(math.Float32bits(v) >> 16) }
	tests := []struct {
		name  string
		tp    *onnxpb.TensorProto
		dt    bundle.DType
		shape []int64
		want  []float64 // Float64At of each element
	}{
		{"float_data", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{2, 2}, FloatData: []float32{1.5, -2, 0, 3.25}},
			bundle.Float32, []int64{2, 2}, []float64{1.5, -2, 0, 3.25}},
		{"float_data scalar", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_FLOAT), FloatData: []float32{7}},
			bundle.Float32, []int64{}, []float64{7}},
		{"double_data", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_DOUBLE), Dims: []int64{3}, DoubleData: []float64{1e300, -0.5, math.Pi}},
			bundle.Float64, []int64{3}, []float64{1e300, -0.5, math.Pi}},
		{"int32_data int8", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT8), Dims: []int64{3}, Int32Data: []int32{-128, -5, 127}},
			bundle.Int8, []int64{3}, []float64{-128, -5, 127}},
		{"int32_data uint8", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT8), Dims: []int64{3}, Int32Data: []int32{0, 200, 255}},
			bundle.Uint8, []int64{3}, []float64{0, 200, 255}},
		{"int32_data int16", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT16), Dims: []int64{3}, Int32Data: []int32{-32768, -300, 32767}},
			bundle.Int16, []int64{3}, []float64{-32768, -300, 32767}},
		{"int32_data uint16", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT16), Dims: []int64{2}, Int32Data: []int32{60000, 1}},
			bundle.Uint16, []int64{2}, []float64{60000, 1}},
		{"int32_data int32", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT32), Dims: []int64{1, 3}, Int32Data: []int32{math.MinInt32, 0, math.MaxInt32}},
			bundle.Int32, []int64{1, 3}, []float64{math.MinInt32, 0, math.MaxInt32}},
		{"int32_data bool", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_BOOL), Dims: []int64{3}, Int32Data: []int32{1, 0, 1}},
			bundle.Bool, []int64{3}, []float64{1, 0, 1}},
		{"int32_data float16", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_FLOAT16), Dims: []int64{3}, Int32Data: []int32{f16(1.5), f16(-2), f16(65504)}},
			bundle.Float16, []int64{3}, []float64{1.5, -2, 65504}},
		{"int32_data bfloat16", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_BFLOAT16), Dims: []int64{2}, Int32Data: []int32{bf16(1.5), bf16(-3)}},
			bundle.BFloat16, []int64{2}, []float64{1.5, -3}},
		{"int64_data", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT64), Dims: []int64{3}, Int64Data: []int64{-1, 1 << 40, 0}},
			bundle.Int64, []int64{3}, []float64{-1, 1 << 40, 0}},
		{"uint64_data uint32", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT32), Dims: []int64{2}, Uint64Data: []uint64{math.MaxUint32, 7}},
			bundle.Uint32, []int64{2}, []float64{math.MaxUint32, 7}},
		{"uint64_data uint64", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT64), Dims: []int64{2}, Uint64Data: []uint64{1 << 63, 9}},
			bundle.Uint64, []int64{2}, []float64{1 << 63, 9}},
		{"zero-size float", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{0, 4}},
			bundle.Float32, []int64{0, 4}, nil},
		{"raw_data wins over nothing", &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT16), Dims: []int64{2}, RawData: []byte{0xff, 0xff, 0x02, 0x00}},
			bundle.Int16, []int64{2}, []float64{-1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.tp.Name = proto.String("x")
			got, err := bundle.DecodeTensorProto(marshal(t, tt.tp))
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "x" || got.DType != tt.dt || !slices.Equal(got.Shape, tt.shape) {
				t.Fatalf("got %s %s%v, want x %s%v", got.Name, got.DType, got.Shape, tt.dt, tt.shape)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			if got.Len() != int64(len(tt.want)) {
				t.Fatalf("%d elements, want %d", got.Len(), len(tt.want))
			}
			for i, w := range tt.want {
				if v := got.Float64At(int64(i)); v != w {
					t.Errorf("element %d = %v, want %v", i, v, w)
				}
			}
			// Typed input, raw output: the round trip keeps the values.
			b, err := bundle.EncodeTensorProto(got)
			if err != nil {
				t.Fatal(err)
			}
			back, err := bundle.DecodeTensorProto(b)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, back, got)
		})
	}
}

func TestInt64At(t *testing.T) {
	tp := &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT64), Dims: []int64{2}, Int64Data: []int64{math.MaxInt64, math.MinInt64}}
	got, err := bundle.DecodeTensorProto(marshal(t, tp))
	if err != nil {
		t.Fatal(err)
	}
	if got.Int64At(0) != math.MaxInt64 || got.Int64At(1) != math.MinInt64 {
		t.Errorf("Int64At = %d, %d", got.Int64At(0), got.Int64At(1))
	}
	u := &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT64), Dims: []int64{1}, Uint64Data: []uint64{1<<63 + 5}}
	if got, err = bundle.DecodeTensorProto(marshal(t, u)); err != nil {
		t.Fatal(err)
	}
	if uint64(got.Int64At(0)) != 1<<63+5 {
		t.Errorf("uint64 Int64At = %d, want the bit pattern of 1<<63+5", got.Int64At(0))
	}
	i8 := &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT8), Dims: []int64{1}, Int32Data: []int32{-7}}
	if got, err = bundle.DecodeTensorProto(marshal(t, i8)); err != nil {
		t.Fatal(err)
	}
	if got.Int64At(0) != -7 {
		t.Errorf("int8 Int64At = %d, want -7", got.Int64At(0))
	}
}

func TestDecodeTensorProtoErrors(t *testing.T) {
	f32 := dtype(onnxpb.TensorProto_FLOAT)
	ext := onnxpb.TensorProto_EXTERNAL
	tests := []struct {
		name string
		data []byte
		tp   *onnxpb.TensorProto
		want string
	}{
		{name: "not a protobuf", data: []byte("hello, world"), want: "not a serialized TensorProto"},
		{name: "too few float_data", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{3}, FloatData: []float32{1, 2}},
			want: "2 values for shape [3] (3 elements)"},
		{name: "too many float_data", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{2}, FloatData: []float32{1, 2, 3}},
			want: "3 values"},
		{name: "too few int32_data", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT8), Dims: []int64{2, 2}, Int32Data: []int32{1}},
			want: "1 values for shape [2 2] (4 elements)"},
		{name: "too many int64_data", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT64), Dims: []int64{}, Int64Data: []int64{1, 2}},
			want: "2 values"},
		{name: "too few uint64_data", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_UINT32), Dims: []int64{3}, Uint64Data: []uint64{1}},
			want: "1 values for shape [3]"},
		{name: "too many double_data", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_DOUBLE), Dims: []int64{1}, DoubleData: []float64{1, 2}},
			want: "2 values"},
		{name: "values in the wrong typed field", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{2}, Int64Data: []int64{1, 2}},
			want: "0 values for shape [2]"},
		{name: "raw_data too short", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{2}, RawData: make([]byte, 7)},
			want: "raw_data holds 7 bytes, want 8 for float32[2]"},
		{name: "raw_data too long", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_INT64), Dims: []int64{1}, RawData: make([]byte, 9)},
			want: "raw_data holds 9 bytes, want 8"},
		{name: "no values for a scalar", tp: &onnxpb.TensorProto{DataType: f32},
			want: "raw_data holds 0 bytes, want 4"},
		{name: "external data location", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{1}, DataLocation: &ext,
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("weights.bin")}}},
			want: "external data is not supported"},
		{name: "external data entries only", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{1},
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("/etc/passwd")}}},
			want: "external data is not supported"},
		{name: "segment", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{1}, FloatData: []float32{1},
			Segment: &onnxpb.TensorProto_Segment{Begin: proto.Int64(0), End: proto.Int64(1)}},
			want: "segmented tensors are not supported"},
		{name: "string tensor", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_STRING), Dims: []int64{1}, StringData: [][]byte{[]byte("a")}},
			want: "unsupported ONNX element type STRING"},
		{name: "undefined type", tp: &onnxpb.TensorProto{Dims: []int64{1}, RawData: []byte{1}},
			want: "unsupported ONNX element type UNDEFINED"},
		{name: "unknown type number", tp: &onnxpb.TensorProto{DataType: proto.Int32(999), Dims: []int64{1}, RawData: []byte{1}},
			want: "unsupported ONNX element type 999"},
		{name: "negative dim", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{2, -1}},
			want: "negative dimension in shape [2 -1]"},
		{name: "overflowing shape", tp: &onnxpb.TensorProto{DataType: f32, Dims: []int64{1 << 40, 1 << 40, 1 << 40}, FloatData: []float32{1}},
			want: "is too large"},
		{name: "shape above the size limit", tp: &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_DOUBLE), Dims: []int64{1 << 30, 2}, RawData: []byte{1}},
			want: "is too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.data
			if tt.tp != nil {
				tt.tp.Name = proto.String("sample_in")
				data = marshal(t, tt.tp)
			}
			_, err := bundle.DecodeTensorProto(data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeTensorProto: %v, want an error saying %q", err, tt.want)
			}
			if tt.tp != nil && !strings.Contains(err.Error(), `"sample_in"`) {
				t.Errorf("error does not name the tensor: %v", err)
			}
		})
	}
}

// A file that claims a huge shape but holds a few typed values must be
// refused before the decoder allocates the shape.
func TestDecodeHugeTypedShapeDoesNotAllocate(t *testing.T) {
	tp := &onnxpb.TensorProto{DataType: dtype(onnxpb.TensorProto_FLOAT), Dims: []int64{1 << 29}, FloatData: []float32{1}}
	data := marshal(t, tp)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := bundle.DecodeTensorProto(data)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "1 values for shape [536870912]") {
		t.Fatalf("DecodeTensorProto: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("decoding a 100-byte file allocated %d MiB", grew>>20)
	}
}

func TestEncodeTensorProtoRejectsInvalidTensors(t *testing.T) {
	tests := []struct {
		name   string
		tensor bundle.Tensor
		want   string
	}{
		{"unknown dtype", bundle.Tensor{Name: "x", DType: "complex64", Shape: []int64{1}, Data: make([]byte, 8)}, `unknown dtype "complex64"`},
		{"short data", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{2}, Data: make([]byte, 7)}, "7 bytes of data, want 8 for float32[2]"},
		{"data for an empty tensor", bundle.Tensor{Name: "x", DType: bundle.Int8, Shape: []int64{0}, Data: []byte{1}}, "1 bytes of data, want 0"},
		{"negative dim", bundle.Tensor{Name: "x", DType: bundle.Int8, Shape: []int64{-1}}, "negative dimension"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.EncodeTensorProto(tt.tensor)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("EncodeTensorProto: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestFloat64AtEveryDType(t *testing.T) {
	// Element 1 of each tensor, written little-endian by hand.
	tests := []struct {
		dt   bundle.DType
		data []byte
		want float64
	}{
		{bundle.Float32, []byte{0, 0, 0, 0, 0, 0, 0xc0, 0x3f}, 1.5},
		{bundle.Float64, append(make([]byte, 8), 0, 0, 0, 0, 0, 0, 0xf8, 0xbf), -1.5},
		{bundle.Float16, []byte{0, 0, 0x00, 0x3e}, 1.5},
		{bundle.BFloat16, []byte{0, 0, 0xc0, 0xbf}, -1.5},
		{bundle.Int8, []byte{0, 0xfe}, -2},
		{bundle.Uint8, []byte{0, 0xfe}, 254},
		{bundle.Bool, []byte{0, 1}, 1},
		{bundle.Int16, []byte{0, 0, 0xfe, 0xff}, -2},
		{bundle.Uint16, []byte{0, 0, 0xfe, 0xff}, 65534},
		{bundle.Int32, []byte{0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}, -2},
		{bundle.Uint32, []byte{0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}, 4294967294},
		{bundle.Int64, append(make([]byte, 8), 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), -2},
		{bundle.Uint64, append(make([]byte, 8), 0, 0, 0, 0, 0, 0, 0, 0x80), 1 << 63},
	}
	for _, tt := range tests {
		tensor := bundle.Tensor{DType: tt.dt, Shape: []int64{2}, Data: tt.data}
		if err := tensor.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.dt, err)
		}
		if got := tensor.Float64At(1); got != tt.want {
			t.Errorf("%s: Float64At(1) = %v, want %v", tt.dt, got, tt.want)
		}
	}
}

func TestDTypes(t *testing.T) {
	for _, dt := range allDTypes {
		if !dt.Valid() || dt.Size() == 0 {
			t.Errorf("%s: Valid %v Size %d", dt, dt.Valid(), dt.Size())
		}
		back, err := bundle.DTypeFromONNX(int32(dt.ONNX()))
		if err != nil || back != dt {
			t.Errorf("DTypeFromONNX(%s.ONNX()) = %s, %v", dt, back, err)
		}
		if p, err := bundle.ParseDType(string(dt)); err != nil || p != dt {
			t.Errorf("ParseDType(%s) = %s, %v", dt, p, err)
		}
	}
	for _, s := range []string{"", "float", "Float32", "string", "complex64"} {
		if _, err := bundle.ParseDType(s); err == nil || !strings.Contains(err.Error(), "unknown dtype") {
			t.Errorf("ParseDType(%q) = %v", s, err)
		}
	}
	floats := 0
	for _, dt := range allDTypes {
		if dt.IsFloat() {
			floats++
		}
	}
	if floats != 4 || !bundle.BFloat16.IsFloat() || bundle.Int32.IsFloat() || bundle.Bool.IsFloat() {
		t.Errorf("IsFloat is wrong (%d float types)", floats)
	}
}

func TestIndex(t *testing.T) {
	tests := []struct {
		shape []int64
		flat  int64
		want  []int64
	}{
		{[]int64{}, 0, []int64{}},
		{[]int64{5}, 3, []int64{3}},
		{[]int64{2, 3, 4}, 0, []int64{0, 0, 0}},
		{[]int64{2, 3, 4}, 23, []int64{1, 2, 3}},
		{[]int64{2, 3, 4}, 13, []int64{1, 0, 1}},
	}
	for _, tt := range tests {
		if got := bundle.Index(tt.shape, tt.flat); !slices.Equal(got, tt.want) {
			t.Errorf("Index(%v, %d) = %v, want %v", tt.shape, tt.flat, got, tt.want)
		}
	}
}

func TestResizeAxis(t *testing.T) {
	base := bundle.Tensor{Name: "x", DType: bundle.Int8, Shape: []int64{2, 3}, Data: []byte{0, 1, 2, 3, 4, 5}}
	tests := []struct {
		name  string
		axis  int
		n     int64
		shape []int64
		data  []byte
		err   string
	}{
		{name: "slice axis 0", axis: 0, n: 1, shape: []int64{1, 3}, data: []byte{0, 1, 2}},
		{name: "same size", axis: 0, n: 2, shape: []int64{2, 3}, data: []byte{0, 1, 2, 3, 4, 5}},
		{name: "grow axis 0 repeats the first row", axis: 0, n: 3, shape: []int64{3, 3}, data: []byte{0, 1, 2, 0, 1, 2, 0, 1, 2}},
		{name: "slice axis 1", axis: 1, n: 2, shape: []int64{2, 2}, data: []byte{0, 1, 3, 4}},
		{name: "grow axis 1", axis: 1, n: 4, shape: []int64{2, 4}, data: []byte{0, 0, 0, 0, 3, 3, 3, 3}},
		{name: "to zero", axis: 0, n: 0, shape: []int64{0, 3}, data: []byte{}},
		{name: "axis out of range", axis: 2, n: 1, err: "axis 2 out of range for rank 2"},
		{name: "negative axis", axis: -1, n: 1, err: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := base.ResizeAxis(tt.axis, tt.n)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ResizeAxis: %v, want an error saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Shape, tt.shape) || !bytes.Equal(got.Data, tt.data) {
				t.Errorf("got %v %v, want %v %v", got.Shape, got.Data, tt.shape, tt.data)
			}
			if err := got.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	if !slices.Equal(base.Data, []byte{0, 1, 2, 3, 4, 5}) || !slices.Equal(base.Shape, []int64{2, 3}) {
		t.Error("ResizeAxis modified its receiver")
	}
	empty := bundle.Tensor{Name: "e", DType: bundle.Float32, Shape: []int64{0, 2}}
	if _, err := empty.ResizeAxis(0, 2); err == nil || !strings.Contains(err.Error(), "cannot resize empty axis 0") {
		t.Errorf("resizing an empty axis: %v", err)
	}
}

// onnxTestData is the ONNX conformance corpus (Debian's libonnx-testdata),
// as `make testdata` unpacks it, or where the package installs it.
func onnxTestData(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("TUNEFLEET_ONNX_TESTDATA"), "/usr/share/libonnx-testdata/data"} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "node", "test_abs", "test_data_set_0", "input_0.pb")); err == nil {
			return dir
		}
	}
	t.Skip("ONNX test corpus not found (run `make testdata` or install libonnx-testdata)")
	return ""
}

func TestDecodeONNXTestData(t *testing.T) {
	root := onnxTestData(t)
	known := []struct {
		file  string
		dt    bundle.DType
		shape []int64
	}{
		{"node/test_abs/test_data_set_0/input_0.pb", bundle.Float32, []int64{3, 4, 5}},
		{"node/test_abs/test_data_set_0/output_0.pb", bundle.Float32, []int64{3, 4, 5}},
		{"node/test_add_uint8/test_data_set_0/input_0.pb", bundle.Uint8, []int64{3, 4, 5}},
		{"node/test_cast_FLOAT_to_FLOAT16/test_data_set_0/output_0.pb", bundle.Float16, []int64{3, 4}},
		{"node/test_max_int16/test_data_set_0/input_0.pb", bundle.Int16, nil},
		{"node/test_clip_default_int8_inbounds/test_data_set_0/input_0.pb", bundle.Int8, nil},
		{"node/test_bitshift_left_uint32/test_data_set_0/input_0.pb", bundle.Uint32, nil},
		{"node/test_basic_convinteger/test_data_set_0/output_0.pb", bundle.Int32, nil},
		{"node/test_adagrad/test_data_set_0/input_1.pb", bundle.Int64, nil},
		{"node/test_cast_FLOAT16_to_DOUBLE/test_data_set_0/output_0.pb", bundle.Float64, []int64{3, 4}},
		{"node/test_and_bcast3v1d/test_data_set_0/input_0.pb", bundle.Bool, []int64{3, 4, 5}},
		{"node/test_bitshift_left_uint64/test_data_set_0/input_0.pb", bundle.Uint64, []int64{3}},
	}
	for _, k := range known {
		tensor, err := bundle.ReadTensorFile(filepath.Join(root, k.file))
		if err != nil {
			t.Errorf("%s: %v", k.file, err)
			continue
		}
		if tensor.DType != k.dt || k.shape != nil && !slices.Equal(tensor.Shape, k.shape) {
			t.Errorf("%s: %s%v, want %s%v", k.file, tensor.DType, tensor.Shape, k.dt, k.shape)
		}
		for _, i := range []int64{0, 1, tensor.Len() / 2, tensor.Len() - 1} {
			if i >= tensor.Len() {
				continue
			}
			if v := tensor.Float64At(i); math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s: element %d is %v", k.file, i, v)
			}
		}
	}
	abs, err := bundle.ReadTensorFile(filepath.Join(root, "node/test_abs/test_data_set_0/input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := bundle.ReadTensorFile(filepath.Join(root, "node/test_abs/test_data_set_0/output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range abs.Len() {
		if math.Abs(abs.Float64At(i)) != want.Float64At(i) {
			t.Fatalf("test_abs element %d: |%v| != %v", i, abs.Float64At(i), want.Float64At(i))
		}
	}
}

// Every sample file of the ONNX node tests either decodes into a valid
// tensor that round-trips, or is refused with an error (strings,
// sequences, optionals, types we do not support) — never a panic.
func TestDecodeWholeONNXNodeCorpus(t *testing.T) {
	root := onnxTestData(t)
	files, err := filepath.Glob(filepath.Join(root, "node", "*", "test_data_set_*", "*.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() && len(files) > 200 {
		files = files[:200]
	}
	ok, refused := 0, 0
	seen := map[bundle.DType]bool{}
	for _, f := range files {
		tensor, err := bundle.ReadTensorFile(f)
		if err != nil {
			refused++
			continue
		}
		ok++
		seen[tensor.DType] = true
		if err := tensor.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		b, err := bundle.EncodeTensorProto(tensor)
		if err != nil {
			t.Errorf("%s: encode: %v", f, err)
			continue
		}
		back, err := bundle.DecodeTensorProto(b)
		if err != nil {
			t.Errorf("%s: decode again: %v", f, err)
			continue
		}
		sameTensor(t, back, tensor)
	}
	t.Logf("%d sample files: %d decoded, %d refused; dtypes %v", len(files), ok, refused, slices.Sorted(maps.Keys(seen)))
	if ok < len(files)/2 {
		t.Errorf("only %d of %d corpus files decoded", ok, len(files))
	}
}

func TestTensorValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    bundle.Tensor
		want string // "" for valid
	}{
		{"ok", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{2, 3}, Data: make([]byte, 24)}, ""},
		{"scalar", bundle.Tensor{Name: "x", DType: bundle.Int64, Data: make([]byte, 8)}, ""},
		{"empty dim", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{0, 1 << 62}}, ""},
		{"short data", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{2, 3}, Data: make([]byte, 20)}, "20 bytes of data, want 24"},
		{"negative dim", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{-1}}, "negative dimension"},
		// 1<<62 × 4 elements × 4 bytes wraps to 0 in int64.
		{"wrapping shape", bundle.Tensor{Name: "x", DType: bundle.Float32, Shape: []int64{1 << 62, 4}}, "more than 4 GiB"},
		{"unknown dtype", bundle.Tensor{Name: "x", DType: "complex64"}, "unknown dtype"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
