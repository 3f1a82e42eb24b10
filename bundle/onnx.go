package bundle

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// ValueInfo is one graph input or output as the ONNX model declares it.
// A dim is its size when known; Params holds the symbolic name of a dynamic
// dim ("N", "batch") or "" where the model gives none.
type ValueInfo struct {
	Name   string
	DType  DType
	Dims   []int64 // -1 for a dynamic dim
	Params []string
}

// GraphIO is what the rest of tunefleet needs to know about an ONNX graph:
// its real inputs (initializers excluded) and outputs, in graph order.
type GraphIO struct {
	IRVersion int64
	Opsets    map[string]int64
	Inputs    []ValueInfo
	Outputs   []ValueInfo
	// ExternalData holds the external-data locations of the model's
	// tensors as written in it (relative to the ONNX file's directory,
	// unless hostile): unchecked here, see Bundle's validation.
	ExternalData []string
}

// ReadGraphIO parses an ONNX model file and returns its inputs and outputs.
func ReadGraphIO(path string) (GraphIO, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return GraphIO{}, err
	}
	io, err := ParseGraphIO(b)
	if err != nil {
		return GraphIO{}, fmt.Errorf("%s: %w", path, err)
	}
	return io, nil
}

// ParseGraphIO parses a serialized ONNX ModelProto.
func ParseGraphIO(b []byte) (GraphIO, error) {
	m, err := leanModel(b)
	if err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
	io, err := graphIOOf(m)
	if err != nil {
		return GraphIO{}, err
	}
	if io.ExternalData, err = externalLocations(b); err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
	return io, nil
}

// graphIOOf reads the inputs and outputs of a decoded model.
func graphIOOf(m *onnxpb.ModelProto) (GraphIO, error) {
	g := m.GetGraph()
	if m.GetIrVersion() <= 0 || g == nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: no ir_version or no graph")
	}
	if len(g.GetNode()) == 0 {
		return GraphIO{}, fmt.Errorf("ONNX graph %q has no nodes", g.GetName())
	}
	if len(g.GetOutput()) == 0 {
		return GraphIO{}, fmt.Errorf("ONNX graph %q has no outputs", g.GetName())
	}
	out := GraphIO{IRVersion: m.GetIrVersion(), Opsets: map[string]int64{}}
	for _, o := range m.GetOpsetImport() {
		out.Opsets[o.GetDomain()] = o.GetVersion()
	}
	// Before IR 4 initializers were also listed as inputs; they are weights,
	// not something a sample feeds.
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	for _, vi := range g.GetInput() {
		if inits[vi.GetName()] {
			continue
		}
		v, err := valueInfo(vi)
		if err != nil {
			return GraphIO{}, fmt.Errorf("input %q: %w", vi.GetName(), err)
		}
		out.Inputs = append(out.Inputs, v)
	}
	for _, vi := range g.GetOutput() {
		v, err := valueInfo(vi)
		if err != nil {
			return GraphIO{}, fmt.Errorf("output %q: %w", vi.GetName(), err)
		}
		out.Outputs = append(out.Outputs, v)
	}
	return out, nil
}

func valueInfo(vi *onnxpb.ValueInfoProto) (ValueInfo, error) {
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return ValueInfo{}, fmt.Errorf("only tensor inputs and outputs are supported (sequences, maps and optionals are not)")
	}
	dt, err := DTypeFromONNX(tt.GetElemType())
	if err != nil {
		return ValueInfo{}, err
	}
	v := ValueInfo{Name: vi.GetName(), DType: dt}
	if tt.GetShape() == nil {
		v.Dims = nil // unknown rank
		return v, nil
	}
	v.Dims = []int64{}
	v.Params = []string{}
	for _, d := range tt.GetShape().GetDim() {
		if _, ok := d.GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue); ok && d.GetDimValue() >= 0 {
			v.Dims = append(v.Dims, d.GetDimValue())
			v.Params = append(v.Params, "")
			continue
		}
		v.Dims = append(v.Dims, -1)
		v.Params = append(v.Params, d.GetDimParam())
	}
	return v, nil
}

// RankKnown reports whether the model declares the tensor's rank.
func (v ValueInfo) RankKnown() bool { return v.Dims != nil }

// Field numbers of onnx.proto that leanModel reads.
const (
	modelIRVersion   = 1
	modelGraph       = 7
	modelOpsetImport = 8
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	tensorName       = 8
)

// leanModel decodes what ParseGraphIO needs of a ModelProto: the IR
// version, the opsets, and of the graph its name, inputs, outputs, the
// names of its initializers and whether it has nodes. The weights, most of
// an ONNX file, are skipped in place instead of being copied into the
// decoded message, so checking a model costs its file's size in memory,
// not twice that.
func leanModel(b []byte) (*onnxpb.ModelProto, error) {
	m := &onnxpb.ModelProto{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == modelIRVersion && typ == protowire.VarintType:
			m.IrVersion = proto.Int64(int64(x))
		case num == modelOpsetImport && typ == protowire.BytesType:
			var o onnxpb.OperatorSetIdProto
			if err := proto.Unmarshal(v, &o); err != nil {
				return err
			}
			m.OpsetImport = append(m.OpsetImport, &o)
		case num == modelGraph && typ == protowire.BytesType:
			// A message field that occurs twice is merged, as protobuf
			// decoders do: repeated fields append, scalars are overwritten.
			if m.Graph == nil {
				m.Graph = &onnxpb.GraphProto{}
			}
			return leanGraph(v, m.Graph)
		}
		return nil
	})
	return m, err
}

func leanGraph(b []byte, g *onnxpb.GraphProto) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case graphNode:
			if len(g.Node) == 0 {
				g.Node = append(g.Node, &onnxpb.NodeProto{}) // only "has nodes" is asked
			}
		case graphName:
			g.Name = proto.String(string(v))
		case graphInput, graphOutput:
			var vi onnxpb.ValueInfoProto
			if err := proto.Unmarshal(v, &vi); err != nil {
				return err
			}
			if num == graphInput {
				g.Input = append(g.Input, &vi)
			} else {
				g.Output = append(g.Output, &vi)
			}
		case graphInitializer:
			t := &onnxpb.TensorProto{}
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == tensorName && typ == protowire.BytesType {
					t.Name = proto.String(string(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
			g.Initializer = append(g.Initializer, t)
		}
		return nil
	})
}

// eachField calls fn for every field of a serialized message, in order:
// with the bytes of a length-delimited field, or the value of a varint.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
