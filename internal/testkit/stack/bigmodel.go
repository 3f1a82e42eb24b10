package stack

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// BigModelWeights are the first values of a big model's weight W; the rest
// are zero. y = x + W[0:4].
var BigModelWeights = [4]float32{1, 2, 3, 4}

// WriteBigModel writes an ONNX model of tiny compute and a weight W of
// weightBytes (float32, rounded down to a multiple of 4): y[1,4] = x[1,4] +
// Gather(W, [0,1,2,3]). W is used, so ONNX Runtime loads and keeps all of
// it. With external set, W lives in "<name>.weights" beside the model (ONNX
// external data); otherwise it is inline, in the .onnx file itself (up to
// protobuf's 2 GiB). It streams: whatever the size, it holds one chunk of
// zeros in memory, so a test can make multi-GiB models without holding them.
func WriteBigModel(path string, weightBytes int64, external bool) error {
	n := weightBytes / 4
	if n < int64(len(BigModelWeights)) {
		return fmt.Errorf("big model: weight of %d bytes is smaller than its %d leading values", weightBytes, len(BigModelWeights))
	}
	f32, i64 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64)
	vi := func(name string, dims ...int64) *onnxpb.ValueInfoProto {
		var sd []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			sd = append(sd, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: sd}}}}}
	}
	w := &onnxpb.TensorProto{Name: proto.String("W"), Dims: []int64{n}, DataType: &f32}
	weightsName := filepath.Base(path) + ".weights"
	if external {
		loc := onnxpb.TensorProto_EXTERNAL
		w.DataLocation = &loc
		w.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(weightsName)},
			{Key: proto.String("offset"), Value: proto.String("0")},
			{Key: proto.String("length"), Value: proto.String(fmt.Sprint(n * 4))},
		}
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("big"),
		Node: []*onnxpb.NodeProto{
			{OpType: proto.String("Gather"), Input: []string{"W", "idx"}, Output: []string{"w4"}},
			{OpType: proto.String("Add"), Input: []string{"x", "w4"}, Output: []string{"y"}},
		},
		Initializer: []*onnxpb.TensorProto{{Name: proto.String("idx"), Dims: []int64{4}, DataType: &i64, Int64Data: []int64{0, 1, 2, 3}}},
		Input:       []*onnxpb.ValueInfoProto{vi("x", 1, 4)},
		Output:      []*onnxpb.ValueInfoProto{vi("y", 1, 4)},
	}
	if external {
		g.Initializer = append(g.Initializer, w)
	}
	head, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), ProducerName: proto.String("tunefleet-bigmodel"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}})
	if err != nil {
		return err
	}
	graph, err := proto.Marshal(g)
	if err != nil {
		return err
	}
	if external {
		head = protowire.AppendBytes(protowire.AppendTag(head, 7, protowire.BytesType), graph)
		if err := os.WriteFile(path, head, 0o644); err != nil {
			return err
		}
		return writeWeights(filepath.Join(filepath.Dir(path), weightsName), nil, n)
	}
	// Inline: the graph message ends with W's initializer, whose raw_data
	// (field 9) is streamed after its header. Field order does not matter
	// to a protobuf reader.
	wHead, err := proto.Marshal(w)
	if err != nil {
		return err
	}
	wHead = protowire.AppendVarint(protowire.AppendTag(wHead, 9, protowire.BytesType), uint64(n*4))
	initLen := int64(len(wHead)) + n*4
	graph = protowire.AppendVarint(protowire.AppendTag(graph, 5, protowire.BytesType), uint64(initLen))
	graphLen := int64(len(graph)) + initLen
	head = protowire.AppendVarint(protowire.AppendTag(head, 7, protowire.BytesType), uint64(graphLen))
	return writeWeights(path, append(append(head, graph...), wHead...), n)
}

// writeWeights writes prefix and then n float32: BigModelWeights, zeros.
func writeWeights(path string, prefix []byte, n int64) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := bw.Write(prefix); err != nil {
		return err
	}
	lead := make([]byte, 0, 4*len(BigModelWeights))
	for _, v := range BigModelWeights {
		lead = protowire.AppendFixed32(lead, math.Float32bits(v))
	}
	if _, err := bw.Write(lead); err != nil {
		return err
	}
	if _, err := io.CopyN(bw, zeros{}, n*4-int64(len(lead))); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return bw.Flush()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
