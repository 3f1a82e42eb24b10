package ort

import (
	"fmt"
	"unsafe"

	onnx "github.com/yalue/onnxruntime_go"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
)

// ONNX Runtime's element type enum mirrors ONNX's TensorProto.DataType, so a
// DType's ONNX value is also its ORT value.
func elemType(d bundle.DType) onnx.TensorElementDataType {
	return onnx.TensorElementDataType(d.ONNX())
}

// boundValue is an ORT value together with the Go bytes it reads from or
// writes into, so that results can be read back without a type switch.
type boundValue struct {
	value onnx.Value
	data  []byte // nil for scalars and runtime-allocated values
	dtype bundle.DType
	shape []int64
}

// newInput wraps a sample tensor as an ORT value. Tensors are passed by
// their little-endian bytes (CustomDataTensor), which covers every dtype
// including float16 and bfloat16; rank-0 tensors need the typed scalar API.
func newInput(t bundle.Tensor) (*boundValue, error) {
	if len(t.Shape) == 0 {
		v, err := newScalar(t.DType, t.Data)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		return &boundValue{value: v, dtype: t.DType}, nil
	}
	data := t.Data
	if len(data) == 0 {
		// Zero-element tensors: ORT needs a non-nil buffer even when it
		// reads nothing from it.
		data = make([]byte, 1)
	}
	v, err := onnx.NewCustomDataTensor(onnx.NewShape(t.Shape...), data, elemType(t.DType))
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", t.Name, err)
	}
	return &boundValue{value: v, data: data, dtype: t.DType, shape: t.Shape}, nil
}

// newOutput pre-allocates an output when its shape is known. Pre-allocation
// also avoids two onnxruntime_go v1.27 bugs with runtime-allocated float16
// and rank-0 outputs. A nil result means "let ORT allocate".
func newOutput(o backend.OutputSpec) (*boundValue, error) {
	if o.Shape == nil {
		if o.DType == bundle.Float16 || o.DType == bundle.BFloat16 {
			// ORT would allocate it and onnxruntime_go v1.27 then fail
			// to copy it ("not enough space"): say what is missing.
			return nil, fmt.Errorf("output %q: a %s output needs its shape in advance (onnxruntime_go v1.27 cannot read one ONNX Runtime allocates), and it is not known", o.Name, o.DType)
		}
		return nil, nil
	}
	if len(o.Shape) == 0 {
		v, err := newScalar(o.DType, make([]byte, o.DType.Size()))
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		return &boundValue{value: v, dtype: o.DType}, nil
	}
	n := bundle.NumElements(o.Shape) * int64(o.DType.Size())
	data := make([]byte, max(n, 1))
	v, err := onnx.NewCustomDataTensor(onnx.NewShape(o.Shape...), data, elemType(o.DType))
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", o.Name, err)
	}
	return &boundValue{value: v, data: data[:n], dtype: o.DType, shape: o.Shape}, nil
}

// read copies a value's contents into a Tensor.
func (b *boundValue) read(name string) (bundle.Tensor, error) {
	if b.data != nil {
		return bundle.Tensor{Name: name, DType: b.dtype, Shape: append([]int64{}, b.shape...), Data: append([]byte{}, b.data...)}, nil
	}
	return valueToTensor(name, b.value)
}

func (b *boundValue) destroy() {
	if b != nil && b.value != nil {
		b.value.Destroy()
	}
}

func newScalar(d bundle.DType, raw []byte) (onnx.Value, error) {
	t := bundle.Tensor{DType: d, Shape: []int64{}, Data: raw}
	switch d {
	case bundle.Float32:
		return onnx.NewScalar(float32(t.Float64At(0)))
	case bundle.Float64:
		return onnx.NewScalar(t.Float64At(0))
	case bundle.Int8:
		return onnx.NewScalar(int8(t.Int64At(0)))
	case bundle.Uint8:
		return onnx.NewScalar(uint8(t.Int64At(0)))
	case bundle.Int16:
		return onnx.NewScalar(int16(t.Int64At(0)))
	case bundle.Uint16:
		return onnx.NewScalar(uint16(t.Int64At(0)))
	case bundle.Int32:
		return onnx.NewScalar(int32(t.Int64At(0)))
	case bundle.Uint32:
		return onnx.NewScalar(uint32(t.Int64At(0)))
	case bundle.Int64:
		return onnx.NewScalar(t.Int64At(0))
	case bundle.Uint64:
		return onnx.NewScalar(uint64(t.Int64At(0)))
	case bundle.Bool:
		return onnx.NewScalar(raw[0] != 0)
	}
	return nil, fmt.Errorf("rank-0 %s tensors are not supported by onnxruntime_go", d)
}

// valueToTensor reads a value ORT allocated (or a scalar) back into a
// Tensor by its Go type.
func valueToTensor(name string, v onnx.Value) (bundle.Tensor, error) {
	shape := []int64(v.GetShape())
	switch x := v.(type) {
	case *onnx.Tensor[float32]:
		return fromSlice(name, bundle.Float32, shape, x.GetData()), nil
	case *onnx.Tensor[float64]:
		return fromSlice(name, bundle.Float64, shape, x.GetData()), nil
	case *onnx.Tensor[int8]:
		return fromSlice(name, bundle.Int8, shape, x.GetData()), nil
	case *onnx.Tensor[uint8]:
		return fromSlice(name, bundle.Uint8, shape, x.GetData()), nil
	case *onnx.Tensor[int16]:
		return fromSlice(name, bundle.Int16, shape, x.GetData()), nil
	case *onnx.Tensor[uint16]:
		return fromSlice(name, bundle.Uint16, shape, x.GetData()), nil
	case *onnx.Tensor[int32]:
		return fromSlice(name, bundle.Int32, shape, x.GetData()), nil
	case *onnx.Tensor[uint32]:
		return fromSlice(name, bundle.Uint32, shape, x.GetData()), nil
	case *onnx.Tensor[int64]:
		return fromSlice(name, bundle.Int64, shape, x.GetData()), nil
	case *onnx.Tensor[uint64]:
		return fromSlice(name, bundle.Uint64, shape, x.GetData()), nil
	case *onnx.Tensor[bool]:
		return fromSlice(name, bundle.Bool, shape, x.GetData()), nil
	case *onnx.CustomDataTensor:
		d, err := bundle.DTypeFromONNX(int32(x.DataType()))
		if err != nil {
			return bundle.Tensor{}, err
		}
		return bundle.Tensor{Name: name, DType: d, Shape: shape, Data: append([]byte{}, x.GetData()...)}, nil
	case *onnx.Scalar[float32]:
		return fromSlice(name, bundle.Float32, []int64{}, []float32{x.GetData()}), nil
	case *onnx.Scalar[float64]:
		return fromSlice(name, bundle.Float64, []int64{}, []float64{x.GetData()}), nil
	case *onnx.Scalar[int8]:
		return fromSlice(name, bundle.Int8, []int64{}, []int8{x.GetData()}), nil
	case *onnx.Scalar[uint8]:
		return fromSlice(name, bundle.Uint8, []int64{}, []uint8{x.GetData()}), nil
	case *onnx.Scalar[int16]:
		return fromSlice(name, bundle.Int16, []int64{}, []int16{x.GetData()}), nil
	case *onnx.Scalar[uint16]:
		return fromSlice(name, bundle.Uint16, []int64{}, []uint16{x.GetData()}), nil
	case *onnx.Scalar[int32]:
		return fromSlice(name, bundle.Int32, []int64{}, []int32{x.GetData()}), nil
	case *onnx.Scalar[uint32]:
		return fromSlice(name, bundle.Uint32, []int64{}, []uint32{x.GetData()}), nil
	case *onnx.Scalar[int64]:
		return fromSlice(name, bundle.Int64, []int64{}, []int64{x.GetData()}), nil
	case *onnx.Scalar[uint64]:
		return fromSlice(name, bundle.Uint64, []int64{}, []uint64{x.GetData()}), nil
	case *onnx.Scalar[bool]:
		return fromSlice(name, bundle.Bool, []int64{}, []bool{x.GetData()}), nil
	}
	return bundle.Tensor{}, fmt.Errorf("output %q: values of Go type %T cannot be read back; declare the output's shape so it can be pre-allocated", name, v)
}

// fromSlice copies a typed slice's bytes (little-endian on every platform
// tunefleet runs on) into a Tensor.
func fromSlice[T any](name string, d bundle.DType, shape []int64, s []T) bundle.Tensor {
	var zero T
	n := len(s) * int(unsafe.Sizeof(zero))
	data := make([]byte, n)
	if n > 0 {
		copy(data, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n))
	}
	return bundle.Tensor{Name: name, DType: d, Shape: shape, Data: data}
}
