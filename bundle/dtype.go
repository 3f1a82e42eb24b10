package bundle

import (
	"fmt"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// DType is a tensor element type, named as in bundle.json ("float32", …).
type DType string

// The element types samples may carry.
const (
	Float32  DType = "float32"
	Float16  DType = "float16"
	BFloat16 DType = "bfloat16"
	Float64  DType = "float64"
	Int8     DType = "int8"
	Uint8    DType = "uint8"
	Int16    DType = "int16"
	Uint16   DType = "uint16"
	Int32    DType = "int32"
	Uint32   DType = "uint32"
	Int64    DType = "int64"
	Uint64   DType = "uint64"
	Bool     DType = "bool"
)

type dtypeInfo struct {
	size int
	onnx onnxpb.TensorProto_DataType
}

var dtypes = map[DType]dtypeInfo{
	Float32:  {4, onnxpb.TensorProto_FLOAT},
	Float16:  {2, onnxpb.TensorProto_FLOAT16},
	BFloat16: {2, onnxpb.TensorProto_BFLOAT16},
	Float64:  {8, onnxpb.TensorProto_DOUBLE},
	Int8:     {1, onnxpb.TensorProto_INT8},
	Uint8:    {1, onnxpb.TensorProto_UINT8},
	Int16:    {2, onnxpb.TensorProto_INT16},
	Uint16:   {2, onnxpb.TensorProto_UINT16},
	Int32:    {4, onnxpb.TensorProto_INT32},
	Uint32:   {4, onnxpb.TensorProto_UINT32},
	Int64:    {8, onnxpb.TensorProto_INT64},
	Uint64:   {8, onnxpb.TensorProto_UINT64},
	Bool:     {1, onnxpb.TensorProto_BOOL},
}

// Valid reports whether d is a supported element type.
func (d DType) Valid() bool { _, ok := dtypes[d]; return ok }

// Size is the size of one element in bytes (0 for an unknown type).
func (d DType) Size() int { return dtypes[d].size }

// IsFloat reports whether d is a floating-point type (compared with
// tolerances; the others must match exactly).
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float16 || d == BFloat16 || d == Float64
}

// ONNX is the ONNX TensorProto data type of d.
func (d DType) ONNX() onnxpb.TensorProto_DataType { return dtypes[d].onnx }

// DTypeFromONNX maps an ONNX TensorProto data type to a DType.
func DTypeFromONNX(t int32) (DType, error) {
	for d, info := range dtypes {
		if int32(info.onnx) == t {
			return d, nil
		}
	}
	name := onnxpb.TensorProto_DataType_name[t]
	if name == "" {
		name = fmt.Sprint(t)
	}
	return "", fmt.Errorf("unsupported ONNX element type %s", name)
}

// ParseDType checks a dtype name from bundle.json or a flag.
func ParseDType(s string) (DType, error) {
	d := DType(s)
	if !d.Valid() {
		return "", fmt.Errorf("unknown dtype %q (want one of float32, float16, bfloat16, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool)", s)
	}
	return d, nil
}
