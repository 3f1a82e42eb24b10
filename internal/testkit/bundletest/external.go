package bundletest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// Externalize rewrites the ONNX file at onnxPath so that its initializers
// keep their values in ONNX external data at location (as written into the
// model: relative to the ONNX file's directory, or anything a hostile
// model may say), the way onnx.save_model(..., save_as_external_data=True)
// does. The values are written to filepath.Join(dir of onnxPath, location)
// unless write is false (for a location that must not exist, or points out
// of the bundle). The model computes the same as before.
func Externalize(tb testing.TB, onnxPath, location string, write bool) {
	tb.Helper()
	raw, err := os.ReadFile(onnxPath)
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("bundletest: %s: %v", onnxPath, err)
	}
	var data []byte
	for _, init := range m.GetGraph().GetInitializer() {
		t, err := bundle.FromTensorProto(init)
		if err != nil {
			tb.Fatalf("bundletest: initializer %q: %v", init.GetName(), err)
		}
		for len(data)%64 != 0 { // ONNX aligns external tensors
			data = append(data, 0)
		}
		off := len(data)
		data = append(data, t.Data...)
		init.FloatData, init.Int64Data, init.Int32Data, init.DoubleData, init.RawData = nil, nil, nil, nil, nil
		init.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		init.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(location)},
			{Key: proto.String("offset"), Value: proto.String(strconv.Itoa(off))},
			{Key: proto.String("length"), Value: proto.String(strconv.Itoa(len(t.Data)))},
		}
	}
	out, err := proto.Marshal(&m)
	if err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	if err := os.WriteFile(onnxPath, out, 0o644); err != nil {
		tb.Fatalf("bundletest: %v", err)
	}
	if write {
		p := filepath.Join(filepath.Dir(onnxPath), filepath.FromSlash(location))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatalf("bundletest: %v", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatalf("bundletest: %v", err)
		}
	}
}
