package bundle

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"

	"github.com/tunefleet/tunefleet/shapes"
)

// Tensor is a dense tensor in row-major order with its elements stored as
// little-endian bytes: the layout of a TensorProto's raw_data, of ONNX
// Runtime's buffers and of trtexec's --loadInputs files, so samples move
// between them without conversion.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// NumElements is the product of the shape (1 for a scalar).
func NumElements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Len is the number of elements.
func (t Tensor) Len() int64 { return NumElements(t.Shape) }

// Validate checks that the data length matches dtype and shape.
func (t Tensor) Validate() error {
	if !t.DType.Valid() {
		return fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	// The element count is multiplied up with a bound, so a shape such as
	// [1<<62, 4] cannot wrap around to a small byte count that matches.
	n := int64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
		if d > 0 && n > MaxTensorBytes/d {
			return fmt.Errorf("tensor %q: shape %v holds more than %d GiB", t.Name, t.Shape, MaxTensorBytes>>30)
		}
		n *= d
	}
	want := n * int64(t.DType.Size())
	if int64(len(t.Data)) != want {
		return fmt.Errorf("tensor %q: %d bytes of data, want %d for %s%v", t.Name, len(t.Data), want, t.DType, t.Shape)
	}
	return nil
}

// Float64At returns element i converted to float64 (bools as 0/1).
func (t Tensor) Float64At(i int64) float64 {
	b := t.Data[i*int64(t.DType.Size()):]
	switch t.DType {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case Float16:
		return float64(float16.Frombits(binary.LittleEndian.Uint16(b)).Float32())
	case BFloat16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	case Int8:
		return float64(int8(b[0]))
	case Uint8, Bool:
		return float64(b[0])
	case Int16:
		return float64(int16(binary.LittleEndian.Uint16(b)))
	case Uint16:
		return float64(binary.LittleEndian.Uint16(b))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case Uint32:
		return float64(binary.LittleEndian.Uint32(b))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(b))
	}
	return math.NaN()
}

// Int64At returns element i of an integer or bool tensor exactly.
func (t Tensor) Int64At(i int64) int64 {
	b := t.Data[i*int64(t.DType.Size()):]
	switch t.DType {
	case Int64:
		return int64(binary.LittleEndian.Uint64(b))
	case Uint64:
		return int64(binary.LittleEndian.Uint64(b))
	}
	return int64(t.Float64At(i))
}

// Index converts a flat element index into a multi-dimensional index.
func Index(shape []int64, flat int64) []int64 {
	idx := make([]int64, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		if shape[k] > 0 {
			idx[k] = flat % shape[k]
			flat /= shape[k]
		}
	}
	return idx
}

// ResizeAxis returns a copy of t whose axis has size n: larger tensors are
// sliced, smaller ones are reduced to their first element along the axis and
// repeated — AITune's make_batch rule, used to build batches of any size
// from one recorded sample.
func (t Tensor) ResizeAxis(axis int, n int64) (Tensor, error) {
	if axis < 0 || axis >= len(t.Shape) {
		return Tensor{}, fmt.Errorf("tensor %q: axis %d out of range for rank %d", t.Name, axis, len(t.Shape))
	}
	if t.Shape[axis] == 0 {
		return Tensor{}, fmt.Errorf("tensor %q: cannot resize empty axis %d", t.Name, axis)
	}
	cur := t.Shape[axis]
	shape := append([]int64(nil), t.Shape...)
	shape[axis] = n
	// Checked before allocating: a manifest read back from shared storage
	// may ask for any size, and a make() of 2^48 bytes kills the process
	// (a fatal error, not a panic) while 10^15 panics.
	if n < 0 || n > shapes.MaxDim {
		return Tensor{}, fmt.Errorf("tensor %q: axis %d of size %d is beyond the limit of %d per dim", t.Name, axis, n, shapes.MaxDim)
	}
	size, ok := boundedProduct(shape, int64(t.DType.Size()), MaxTensorBytes)
	if !ok || int64(len(t.Data)) != NumElements(t.Shape)*int64(t.DType.Size()) {
		if ok {
			return Tensor{}, fmt.Errorf("tensor %q: %d bytes of data do not match shape %v", t.Name, len(t.Data), t.Shape)
		}
		return Tensor{}, fmt.Errorf("tensor %q: shape %s holds more than %s, the limit per tensor", t.Name, shapes.FormatShape(shape), gib(MaxTensorBytes))
	}
	outer := NumElements(t.Shape[:axis])
	inner := NumElements(t.Shape[axis+1:]) * int64(t.DType.Size())
	data := make([]byte, 0, size)
	for o := int64(0); o < outer; o++ {
		block := t.Data[o*cur*inner : (o+1)*cur*inner]
		if n <= cur {
			data = append(data, block[:n*inner]...)
			continue
		}
		first := block[:inner]
		for k := int64(0); k < n; k++ {
			data = append(data, first...)
		}
	}
	return Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: data}, nil
}

// ResizeBatch returns the tensors with every batch axis of their
// declarations (decls[i] declares ts[i]) resized to bs, as ResizeAxis
// resizes one axis.
func ResizeBatch(ts []Tensor, decls []TensorDecl, bs int) ([]Tensor, error) {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		for _, ax := range decls[i].BatchAxes() {
			var err error
			if t, err = t.ResizeAxis(ax, int64(bs)); err != nil {
				return nil, err
			}
		}
		out[i] = t
	}
	return out, nil
}

// PutFloat stores v as one element of a floating-point dtype at the start
// of b, little-endian, rounding to the dtype (bfloat16 to nearest even);
// the inverse of Float64At. It panics on a non-float dtype.
func PutFloat(b []byte, d DType, v float64) {
	switch d {
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case Float16:
		binary.LittleEndian.PutUint16(b, float16.Fromfloat32(float32(v)).Bits())
	case BFloat16:
		binary.LittleEndian.PutUint16(b, bfloat16Bits(float32(v)))
	default:
		panic("bundle.PutFloat: " + string(d) + " is not a float dtype")
	}
}

// bfloat16Bits rounds a float32 to bfloat16, to nearest even; NaN stays a
// quiet NaN.
func bfloat16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// PutUint stores the low bytes of v as one little-endian integer element
// of the given width (1, 2, 4 or 8 bytes) at the start of b: integer and
// bool dtypes, whatever their signedness (two's complement).
func PutUint(b []byte, width int, v uint64) {
	switch width {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, v)
	default:
		panic("bundle.PutUint: width must be 1, 2, 4 or 8")
	}
}
