package bundle

// The byte-slice decoder that the streaming one replaced, kept as the
// reference it is checked against (onnx_stream_test.go): same results and
// same errors on the ONNX corpus and on damaged and hostile inputs.

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// refParseGraphIO is ParseGraphIO as it was before it streamed.
func refParseGraphIO(b []byte) (GraphIO, error) {
	domains := map[string]int{}
	m, err := refLeanModel(b, domains)
	if err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
	io, err := graphIOOf(m)
	if err != nil {
		return GraphIO{}, err
	}
	if io.ExternalData, err = refExternalLocations(b); err != nil {
		return GraphIO{}, fmt.Errorf("not an ONNX model: %w", err)
	}
	if len(domains) > 0 {
		io.NodeDomains = domains
	}
	return io, nil
}

// refLeanModel also counts the main graph's nodes by domain into domains
// (a node that does not parse is not counted).
func refLeanModel(b []byte, domains map[string]int) (*onnxpb.ModelProto, error) {
	m := &onnxpb.ModelProto{}
	err := refEachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
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
			return refLeanGraph(v, m.Graph, domains)
		}
		return nil
	})
	return m, err
}

func refLeanGraph(b []byte, g *onnxpb.GraphProto, domains map[string]int) error {
	return refEachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case graphNode:
			if len(g.Node) == 0 {
				g.Node = append(g.Node, &onnxpb.NodeProto{}) // only "has nodes" is asked
			}
			domain := ""
			err := refEachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == nodeDomain && typ == protowire.BytesType {
					domain = string(v)
				}
				return nil
			})
			if err == nil {
				domains[domain]++
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
			err := refEachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
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

// refEachField calls fn for every field of a serialized message, in order:
// with the bytes of a length-delimited field, or the value of a varint.
func refEachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
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

func refExternalLocations(model []byte) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(loc string) {
		if !seen[loc] {
			seen[loc] = true
			out = append(out, loc)
		}
	}
	err := refEachField(model, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case modelGraph:
			return refScanGraph(v, 0, add)
		case modelFunctions:
			return refEachBytes(v, func(num protowire.Number, v []byte) error {
				if num == functionNode {
					return refScanNode(v, 0, add)
				}
				return nil
			})
		}
		return nil
	})
	return out, err
}

// refEachBytes calls fn for every length-delimited field of a message.
func refEachBytes(b []byte, fn func(num protowire.Number, v []byte) error) error {
	return refEachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		return fn(num, v)
	})
}

func refScanGraph(b []byte, depth int, add func(string)) error {
	if depth > maxExternalScanNesting {
		return fmt.Errorf("subgraphs nested more than %d deep", maxExternalScanNesting)
	}
	return refEachBytes(b, func(num protowire.Number, v []byte) error {
		switch num {
		case graphInitializer:
			return refScanTensor(v, add)
		case graphSparseInitializer:
			return refScanSparse(v, add)
		case graphNode:
			return refScanNode(v, depth, add)
		}
		return nil
	})
}

func refScanNode(b []byte, depth int, add func(string)) error {
	return refEachBytes(b, func(num protowire.Number, v []byte) error {
		if num != nodeAttribute {
			return nil
		}
		return refEachBytes(v, func(num protowire.Number, v []byte) error {
			switch num {
			case attrTensor, attrTensors:
				return refScanTensor(v, add)
			case attrSparseTensor, attrSparseTensors:
				return refScanSparse(v, add)
			case attrGraph, attrGraphs:
				return refScanGraph(v, depth+1, add)
			}
			return nil
		})
	})
}

func refScanSparse(b []byte, add func(string)) error {
	return refEachBytes(b, func(num protowire.Number, v []byte) error {
		if num == sparseValues || num == sparseIndices {
			return refScanTensor(v, add)
		}
		return nil
	})
}

// refScanTensor adds a TensorProto's external-data location. Its
// data_location is not consulted: a location is a path a reader may
// follow, whatever the flag says, so every one is checked.
func refScanTensor(b []byte, add func(string)) error {
	return refEachBytes(b, func(num protowire.Number, v []byte) error {
		if num != tensorExternalData {
			return nil
		}
		var key, value string
		err := refEachBytes(v, func(num protowire.Number, v []byte) error {
			switch num {
			case stringStringKey:
				key = string(v)
			case stringStringValue:
				value = string(v)
			}
			return nil
		})
		if err == nil && key == externalLocationKey {
			add(value)
		}
		return err
	})
}
