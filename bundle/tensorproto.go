package bundle

import (
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/fsutil"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// DecodeTensorProto parses a serialized ONNX TensorProto (an input_<k>.pb or
// output_<k>.pb file) into a Tensor. Both raw_data and the typed repeated
// fields are accepted, as ONNX's own tools write either.
func DecodeTensorProto(b []byte) (Tensor, error) {
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(b, &tp); err != nil {
		return Tensor{}, fmt.Errorf("not a serialized TensorProto: %w", err)
	}
	// tp is this function's own: its raw_data becomes the tensor's data
	// without a copy (a sample may be gigabytes).
	return fromTensorProto(&tp, false)
}

// FromTensorProto converts a parsed TensorProto into a Tensor, which owns
// a copy of its data.
func FromTensorProto(tp *onnxpb.TensorProto) (Tensor, error) {
	return fromTensorProto(tp, true)
}

func fromTensorProto(tp *onnxpb.TensorProto, copyRaw bool) (Tensor, error) {
	name := tp.GetName()
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(tp.GetExternalData()) > 0 {
		return Tensor{}, fmt.Errorf("tensor %q: external data is not supported in samples (store the values in the .pb file)", name)
	}
	if tp.GetSegment() != nil {
		return Tensor{}, fmt.Errorf("tensor %q: segmented tensors are not supported", name)
	}
	dt, err := DTypeFromONNX(tp.GetDataType())
	if err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	shape := append([]int64{}, tp.GetDims()...)
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return Tensor{}, fmt.Errorf("tensor %q: negative dimension in shape %v", name, shape)
		}
		if d > 0 && n > MaxTensorBytes/d {
			return Tensor{}, fmt.Errorf("tensor %q: shape %v is too large", name, shape)
		}
		n *= d
	}
	size := int64(dt.Size())
	if n*size > MaxTensorBytes {
		return Tensor{}, fmt.Errorf("tensor %q: shape %v is too large", name, shape)
	}
	t := Tensor{Name: name, DType: dt, Shape: shape}
	if raw := tp.GetRawData(); len(raw) > 0 || hasNoTypedData(tp) {
		if int64(len(raw)) != n*size {
			return Tensor{}, fmt.Errorf("tensor %q: raw_data holds %d bytes, want %d for %s%v (truncated or corrupt file?)", name, len(raw), n*size, dt, shape)
		}
		t.Data = raw
		if copyRaw {
			t.Data = append([]byte{}, raw...)
		}
		return t, nil
	}
	// Count before allocating: a small file may claim a huge shape.
	if count := typedCount(dt, tp); count != n {
		return Tensor{}, fmt.Errorf("tensor %q: %d values for shape %v (%d elements)", name, count, shape, n)
	}
	t.Data = make([]byte, n*size)
	if _, err := fillTyped(&t, tp); err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	return t, nil
}

// typedCount is the number of values in the typed field that holds dt.
func typedCount(dt DType, tp *onnxpb.TensorProto) int64 {
	switch dt {
	case Float32:
		return int64(len(tp.GetFloatData()))
	case Float64:
		return int64(len(tp.GetDoubleData()))
	case Int64:
		return int64(len(tp.GetInt64Data()))
	case Uint32, Uint64:
		return int64(len(tp.GetUint64Data()))
	default:
		return int64(len(tp.GetInt32Data()))
	}
}

func hasNoTypedData(tp *onnxpb.TensorProto) bool {
	return len(tp.GetFloatData()) == 0 && len(tp.GetInt32Data()) == 0 && len(tp.GetInt64Data()) == 0 &&
		len(tp.GetDoubleData()) == 0 && len(tp.GetUint64Data()) == 0 && len(tp.GetStringData()) == 0
}

// fillTyped copies the typed repeated field that the ONNX spec assigns to
// t.DType into t.Data and returns how many values it held.
func fillTyped(t *Tensor, tp *onnxpb.TensorProto) (int64, error) {
	d := t.Data
	put := func(i int, v uint64) bool {
		off := i * t.DType.Size()
		if off+t.DType.Size() > len(d) {
			return false
		}
		PutUint(d[off:], t.DType.Size(), v)
		return true
	}
	var count int
	ok := true
	switch t.DType {
	case Float32:
		vals := tp.GetFloatData()
		count = len(vals)
		for i, v := range vals {
			ok = ok && put(i, uint64(math.Float32bits(v)))
		}
	case Float64:
		vals := tp.GetDoubleData()
		count = len(vals)
		for i, v := range vals {
			ok = ok && put(i, math.Float64bits(v))
		}
	case Int64:
		vals := tp.GetInt64Data()
		count = len(vals)
		for i, v := range vals {
			ok = ok && put(i, uint64(v))
		}
	case Uint32, Uint64:
		vals := tp.GetUint64Data()
		count = len(vals)
		for i, v := range vals {
			ok = ok && put(i, v)
		}
	default:
		// int8, uint8, int16, uint16, int32, bool, float16 and bfloat16
		// travel in int32_data; the 16-bit floats as their bit patterns.
		vals := tp.GetInt32Data()
		count = len(vals)
		for i, v := range vals {
			ok = ok && put(i, uint64(uint32(v)))
		}
	}
	if !ok {
		return int64(count), fmt.Errorf("%d values do not fit shape %v", count, t.Shape)
	}
	return int64(count), nil
}

// ToTensorProto converts t into a TensorProto with raw_data.
func ToTensorProto(t Tensor) (*onnxpb.TensorProto, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	dt := int32(t.DType.ONNX())
	return &onnxpb.TensorProto{
		Name:     proto.String(t.Name),
		DataType: &dt,
		Dims:     append([]int64{}, t.Shape...),
		RawData:  t.Data,
	}, nil
}

// EncodeTensorProto serializes t as a TensorProto with raw_data.
func EncodeTensorProto(t Tensor) ([]byte, error) {
	tp, err := ToTensorProto(t)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(tp)
}

// ReadTensorFile reads one input_<k>.pb / output_<k>.pb file.
func ReadTensorFile(path string) (Tensor, error) {
	// Refused before it is read: a file far larger than any tensor may be
	// would otherwise be read whole first.
	if fi, err := os.Stat(path); err == nil && fi.Size() > MaxTensorBytes+1<<20 {
		return Tensor{}, fmt.Errorf("%s: %d bytes, more than a tensor may hold (%d GiB)", path, fi.Size(), MaxTensorBytes>>30)
	}
	b, err := fsutil.ReadRegular(path)
	if err != nil {
		return Tensor{}, err
	}
	t, err := DecodeTensorProto(b)
	if err != nil {
		return Tensor{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
