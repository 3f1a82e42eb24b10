package bundle

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// The lean decoding of a model gives what the full one does, on every
// model of the ONNX conformance corpus.
func TestLeanModelAgreesWithFullDecoding(t *testing.T) {
	root := ""
	for _, dir := range []string{os.Getenv("TUNEFLEET_ONNX_TESTDATA"), "/usr/share/libonnx-testdata/data"} {
		if dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
				root = dir
				break
			}
		}
	}
	if root == "" {
		t.Skip("ONNX test corpus not found (run `make testdata` or install libonnx-testdata)")
	}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".onnx") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var full onnxpb.ModelProto
		if err := proto.Unmarshal(b, &full); err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		lean, _, _, err := leanModel(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Errorf("%s: lean decoding: %v", p, err)
			return nil
		}
		wantIO, wantErr := graphIOOf(&full)
		gotIO, gotErr := graphIOOf(lean)
		if !reflect.DeepEqual(gotIO, wantIO) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: lean %+v (%v), full %+v (%v)", p, gotIO, gotErr, wantIO, wantErr)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d models compared", n)
	}
}

// A graph field that occurs twice is merged, as the full decoding does.
func TestLeanModelMergesARepeatedGraph(t *testing.T) {
	vi := func(name string) *onnxpb.ValueInfoProto {
		elem := int32(onnxpb.TensorProto_FLOAT)
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &elem, Shape: &onnxpb.TensorShapeProto{}}}}}
	}
	part := func(g *onnxpb.GraphProto) []byte {
		b, err := proto.Marshal(&onnxpb.ModelProto{Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	head, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8)})
	if err != nil {
		t.Fatal(err)
	}
	b := append(head, part(&onnxpb.GraphProto{Input: []*onnxpb.ValueInfoProto{vi("x")}})...)
	b = append(b, part(&onnxpb.GraphProto{Name: proto.String("g"), Node: []*onnxpb.NodeProto{{OpType: proto.String("Relu")}}, Output: []*onnxpb.ValueInfoProto{vi("y")}})...)
	var full onnxpb.ModelProto
	if err := proto.Unmarshal(b, &full); err != nil {
		t.Fatal(err)
	}
	lean, _, _, err := leanModel(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want, werr := graphIOOf(&full)
	got, gerr := graphIOOf(lean)
	if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) || len(got.Inputs) != 1 || len(got.Outputs) != 1 {
		t.Fatalf("lean %+v (%v), full %+v (%v)", got, gerr, want, werr)
	}
}
