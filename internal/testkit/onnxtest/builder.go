package onnxtest

import (
	"encoding/binary"
	"math"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// Builder assembles one ONNX model.
type Builder struct {
	m    *onnxpb.ModelProto
	g    *onnxpb.GraphProto
	seed uint64
}

// New starts a model with the default-domain opset given.
func New(name string, opset int64) *Builder {
	g := &onnxpb.GraphProto{Name: proto.String(name)}
	m := &onnxpb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("tunefleet-onnxtest"),
		Graph:        g,
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
	}
	return &Builder{m: m, g: g, seed: 0x9E3779B97F4A7C15}
}

func valueInfo(name string, elem onnxpb.TensorProto_DataType, dims []any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		switch v := d.(type) {
		case string:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: v}})
		case int:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(v)}})
		case int64:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}})
		}
	}
	et := int32(elem)
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et, Shape: shape}}},
	}
}

// Input declares a graph input; dims are ints (static) or strings (symbolic).
func (b *Builder) Input(name string, elem onnxpb.TensorProto_DataType, dims ...any) *Builder {
	b.g.Input = append(b.g.Input, valueInfo(name, elem, dims))
	return b
}

// Output declares a graph output.
func (b *Builder) Output(name string, elem onnxpb.TensorProto_DataType, dims ...any) *Builder {
	b.g.Output = append(b.g.Output, valueInfo(name, elem, dims))
	return b
}

// Floats adds a float32 initializer with the given values.
func (b *Builder) Floats(name string, shape []int64, vals []float32) *Builder {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	dt := int32(onnxpb.TensorProto_FLOAT)
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{Name: proto.String(name), DataType: &dt, Dims: shape, RawData: raw})
	return b
}

// Int64s adds an int64 initializer.
func (b *Builder) Int64s(name string, shape []int64, vals []int64) *Builder {
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	dt := int32(onnxpb.TensorProto_INT64)
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{Name: proto.String(name), DataType: &dt, Dims: shape, RawData: raw})
	return b
}

// Random adds a float32 initializer with deterministic values in
// [-scale, scale).
func (b *Builder) Random(name string, scale float32, shape ...int64) *Builder {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = (2*b.next() - 1) * scale
	}
	return b.Floats(name, shape, vals)
}

// next is xorshift64*, mapped to [0, 1).
func (b *Builder) next() float32 {
	b.seed ^= b.seed >> 12
	b.seed ^= b.seed << 25
	b.seed ^= b.seed >> 27
	return float32((b.seed*2685821657736338717)>>40) / float32(1<<24)
}

// Node adds a node.
func (b *Builder) Node(op string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) *Builder {
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{
		OpType: proto.String(op), Input: inputs, Output: outputs, Attribute: attrs,
		Name: proto.String(op + "_" + outputs[0]),
	})
	return b
}

// IntAttr is an INT attribute.
func IntAttr(name string, v int64) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_INT
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: &t, I: proto.Int64(v)}
}

// IntsAttr is an INTS attribute.
func IntsAttr(name string, v ...int64) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_INTS
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: &t, Ints: v}
}

// FloatAttr is a FLOAT attribute.
func FloatAttr(name string, v float32) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_FLOAT
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: &t, F: proto.Float32(v)}
}

// Bytes serializes the model.
func (b *Builder) Bytes() []byte {
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(b.m)
	if err != nil {
		panic(err) // only on a programming error in the builder
	}
	return out
}

// Write writes the model to a file.
func (b *Builder) Write(path string) error { return os.WriteFile(path, b.Bytes(), 0o644) }

// Name is the graph's name.
func (b *Builder) Name() string { return b.g.GetName() }
