package bundle

import (
	"fmt"
	"os"

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
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
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
