package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/fsutil"
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
	// ExternalSizes holds, per external-data location, how many bytes
	// the file must hold at least: the largest offset plus length of its
	// tensors (nil without external data). Open refuses a file shorter
	// than that, which ONNX Runtime would fail on deep in a worker.
	ExternalSizes map[string]int64
	// NodeDomains counts the main graph's nodes by operator domain (""
	// for the default ONNX domain). ONNX Runtime's optimized models name
	// its layout rewrites by domain ("com.microsoft.nchwc"), which tie a
	// model to the CPU that optimized it.
	NodeDomains map[string]int
}

// ReadGraphIO parses an ONNX model file and returns its inputs and outputs.
// The file is walked in place (see wireReader): its weights are skipped,
// not read, so checking a 2 GiB model costs memory for its graph structure
// only.
func ReadGraphIO(path string) (GraphIO, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return GraphIO{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return GraphIO{}, err
	}
	io, err := decodeGraphIO(f, fi.Size())
	if err != nil {
		return GraphIO{}, fmt.Errorf("%s: %w", path, err)
	}
	return io, nil
}

// ParseGraphIO parses a serialized ONNX ModelProto.
func ParseGraphIO(b []byte) (GraphIO, error) {
	return decodeGraphIO(bytes.NewReader(b), int64(len(b)))
}

func decodeGraphIO(ra io.ReaderAt, size int64) (GraphIO, error) {
	m, ext, extErr, err := leanModel(ra, size)
	var ioErr *ioError
	if errors.As(err, &ioErr) || errors.As(extErr, &ioErr) {
		return GraphIO{}, ioErr
	}
	if err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
	gio, err := graphIOOf(m)
	if err != nil {
		return GraphIO{}, err
	}
	if extErr != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", extErr)
	}
	gio.ExternalData = ext.out
	gio.NodeDomains = ext.domains
	if len(ext.need) > 0 {
		gio.ExternalSizes = ext.need
	}
	return gio, nil
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
	nodeDomain       = 7
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	tensorName       = 8
)

// leanModel decodes what ParseGraphIO needs of a ModelProto, in one
// streaming pass over the file: the IR version, the opsets, and of the
// graph its name, inputs, outputs, the names of its initializers and
// whether it has nodes; and, in the same pass, the external-data
// locations of its tensors (see externalLocations). The weights, most of
// an ONNX file, are skipped in place without being read.
//
// A damaged node, attribute or external-data entry is reported apart
// (extErr), after the graph's own problems, because that is the order in
// which the two passes this one replaces reported them.
func leanModel(ra io.ReaderAt, size int64) (m *onnxpb.ModelProto, ext *extScan, extErr error, err error) {
	w := newWireReader(ra, size)
	m = &onnxpb.ModelProto{}
	ext = newExtScan()
	err = w.eachField(0, size, func(f field) error {
		switch {
		case f.num == modelIRVersion && f.typ == protowire.VarintType:
			m.IrVersion = proto.Int64(int64(f.x))
		case f.num == modelOpsetImport && f.typ == protowire.BytesType:
			v, err := w.bytes(f)
			if err != nil {
				return err
			}
			var o onnxpb.OperatorSetIdProto
			if err := proto.Unmarshal(v, &o); err != nil {
				return err
			}
			m.OpsetImport = append(m.OpsetImport, &o)
		case f.num == modelGraph && f.typ == protowire.BytesType:
			// A message field that occurs twice is merged, as protobuf
			// decoders do: repeated fields append, scalars are overwritten.
			if m.Graph == nil {
				m.Graph = &onnxpb.GraphProto{}
			}
			return leanGraph(w, f, m.Graph, ext)
		case f.num == modelFunctions && f.typ == protowire.BytesType:
			ext.functions(w, f)
		}
		return nil
	})
	return m, ext, ext.err, err
}

func leanGraph(w *wireReader, g field, gp *onnxpb.GraphProto, ext *extScan) error {
	return w.eachField(g.at, g.end, func(f field) error {
		if f.typ != protowire.BytesType {
			return nil
		}
		switch f.num {
		case graphNode:
			if len(gp.Node) == 0 {
				gp.Node = append(gp.Node, &onnxpb.NodeProto{}) // only "has nodes" is asked
			}
			countDomain(w, f, ext)
			ext.node(w, f, 0)
		case graphName:
			v, err := w.bytes(f)
			if err != nil {
				return err
			}
			gp.Name = proto.String(string(v))
		case graphInput, graphOutput:
			v, err := w.bytes(f)
			if err != nil {
				return err
			}
			var vi onnxpb.ValueInfoProto
			if err := proto.Unmarshal(v, &vi); err != nil {
				return err
			}
			if f.num == graphInput {
				gp.Input = append(gp.Input, &vi)
			} else {
				gp.Output = append(gp.Output, &vi)
			}
		case graphInitializer:
			t, err := leanTensor(w, f, ext)
			if err != nil {
				return err
			}
			gp.Initializer = append(gp.Initializer, t)
		case graphSparseInitializer:
			ext.sparse(w, f)
		}
		return nil
	})
}

// countDomain counts a node of the main graph by its operator domain (the
// last domain field, as protobuf decoders take it). A node that does not
// parse is not counted: the external-data scan of the same node reports
// it.
func countDomain(w *wireReader, n field, ext *extScan) {
	domain := ""
	err := eachBytes(w, n, func(f field) error {
		if f.num != nodeDomain {
			return nil
		}
		v, err := w.bytes(f)
		domain = string(v)
		return err
	})
	if err != nil {
		return
	}
	if ext.domains == nil {
		ext.domains = map[string]int{}
	}
	ext.domains[domain]++
}

// leanTensor reads an initializer's name and external-data locations;
// its values are skipped.
func leanTensor(w *wireReader, t field, ext *extScan) (*onnxpb.TensorProto, error) {
	tp := &onnxpb.TensorProto{}
	var te tensorExtent
	err := w.eachField(t.at, t.end, func(f field) error {
		te.field(w, f)
		if f.typ != protowire.BytesType {
			return nil
		}
		switch f.num {
		case tensorName:
			v, err := w.bytes(f)
			if err != nil {
				return err
			}
			tp.Name = proto.String(string(v))
		case tensorExternalData:
			ext.entry(w, f, &te)
		}
		return nil
	})
	if err == nil && ext.err == nil {
		ext.done(&te)
	}
	return tp, err
}
