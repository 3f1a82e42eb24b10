package trt_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/trt"
)

// strictTimes decodes the times fixture with encoding/json alone, as an
// independent reading to compare the tolerant one with.
func strictTimes(tb testing.TB) []map[string]float64 {
	tb.Helper()
	var raw []map[string]float64
	if err := json.Unmarshal(readFixture(tb, fxTimes), &raw); err != nil {
		tb.Fatal(err)
	}
	return raw
}

func TestReadTimesFixture(t *testing.T) {
	recs, err := trt.ReadTimes(fixture(t, fxTimes))
	if err != nil {
		t.Fatal(err)
	}
	raw := strictTimes(t)
	if len(recs) != 263 || len(recs) != len(raw) {
		t.Fatalf("%d records, want 263", len(recs))
	}
	first := trt.TimeRecord{StartEnqMs: 16.6644, EndEnqMs: 16.9316, StartH2DMs: 16.6236, EndH2DMs: 16.6236, StartComputeMs: 16.6236, EndComputeMs: 29.6417,
		StartD2HMs: 29.6417, EndD2HMs: 29.6417, H2DMs: 0, ComputeMs: 13.0181, D2HMs: 0, LatencyMs: 13.0181}
	if recs[0] != first {
		t.Errorf("first record = %+v", recs[0])
	}
	for i, r := range recs {
		if r.LatencyMs != raw[i]["latencyMs"] || r.ComputeMs != raw[i]["computeMs"] || r.StartEnqMs != raw[i]["startEnqMs"] {
			t.Fatalf("record %d = %+v, want %v", i, r, raw[i])
		}
	}
	durs, err := trt.Latencies(recs)
	if err != nil {
		t.Fatal(err)
	}
	// With --noDataTransfers (the trex run) latency is compute time.
	if durs[0] != time.Duration(13.0181*float64(time.Millisecond)) {
		t.Errorf("first latency = %v", durs[0])
	}
}

// TestApplyStopRule: the trace is cut where backend.Measure would have
// stopped, and summarised the same way.
func TestApplyStopRule(t *testing.T) {
	recs, err := trt.ReadTimes(fixture(t, fxTimes))
	if err != nil {
		t.Fatal(err)
	}
	durs, _ := trt.Latencies(recs)
	raw := strictTimes(t)
	meanOf := func(n int) float64 {
		s := 0.0
		for _, r := range raw[:n] {
			s += float64(time.Duration(r["latencyMs"] * float64(time.Millisecond)))
		}
		return s / float64(n) / float64(time.Millisecond)
	}
	// Default rule: the RTX 3090 trace is steady, so it is stable at
	// MinSamples.
	st := trt.ApplyStopRule(32, durs, backend.DefaultStopRule())
	if st.Samples != 100 || st.StopReason != backend.StopStable || !st.Stable || st.BatchSize != 32 {
		t.Errorf("default rule: %+v", st)
	}
	if math.Abs(st.MeanMs-meanOf(100)) > 1e-9 || math.Abs(st.Throughput-32*1000/st.EstimateMs) > 1e-9 || st.EstimateMs <= 0 {
		t.Errorf("mean %v (want %v), throughput %v", st.MeanMs, meanOf(100), st.Throughput)
	}
	// A rule that cannot be met uses the whole trace: trtexec's duration.
	strict := backend.StopRule{Warmup: 1, Window: 20, MaxCV: 1e-9, MinSamples: 100, MaxSamples: 100000, MaxTime: time.Second}
	st = trt.ApplyStopRule(32, durs, strict)
	if st.Samples != 263 || st.StopReason != backend.StopTimeLimit || st.Stable {
		t.Errorf("strict rule: %+v", st)
	}
	if st.MinMs != 12.0986 || st.MaxMs != 13.0181 || math.Abs(st.MeanMs-meanOf(263)) > 1e-9 {
		t.Errorf("strict rule figures: %+v (mean want %v)", st, meanOf(263))
	}
	// MaxSamples caps the trace.
	capped := strict
	capped.MaxSamples = 150
	if st = trt.ApplyStopRule(1, durs, capped); st.Samples != 150 || st.StopReason != backend.StopMaxSamples {
		t.Errorf("capped rule: %+v", st)
	}
	// It agrees with backend.Summarise on what it keeps.
	want := backend.Summarise(1, durs[:150])
	st.StopReason, st.Stable, st.Short, st.UnstableCause = "", false, false, ""
	want.StopReason, want.Stable, want.UnstableCause = "", false, ""
	if !reflect.DeepEqual(st, want) {
		t.Errorf("ApplyStopRule = %+v, Summarise = %+v", st, want)
	}
}

func TestParseTimesRejects(t *testing.T) {
	for name, in := range map[string]string{
		"TensorRT 7 names": `[ { "startInMs" : 1, "endInMs" : 2, "inMs" : 1 } ]`,
		"no latency":       `[ { "startEnqMs" : 1 } ]`,
		"not JSON":         `[ { "latencyMs" : ]`,
	} {
		if _, err := trt.ParseTimes([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	recs, err := trt.ParseTimes([]byte(`[ { "latencyMs" : nan } ]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trt.Latencies(recs); err == nil {
		t.Error("a nan latency became a duration")
	}
	recs, err = trt.ParseTimes([]byte(`[ { "latencyMs" : 1.5, "endToEndMs" : 2 } ]`))
	if err != nil || recs[0].EndToEndMs == nil || *recs[0].EndToEndMs != 2 {
		t.Errorf("8.0-8.2 endToEndMs: %+v, %v", recs, err)
	}
}

func TestReadProfileFixture(t *testing.T) {
	p, err := trt.ReadProfile(fixture(t, fxProfile))
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 1 || len(p.Layers) != 103 {
		t.Fatalf("count %d, %d layers", p.Count, len(p.Layers))
	}
	l0 := p.Layers[0]
	if l0.Name != "resnet50/conv1_conv/Conv2D__6" || l0.TimeMs != 0.08704 || l0.AverageMs != 0.08704 || l0.MedianMs == nil || *l0.MedianMs != 0.08704 || l0.Percentage != 0.70195 {
		t.Errorf("first layer = %+v", l0)
	}
	last := p.Layers[len(p.Layers)-1]
	if last.Name != "resnet50/predictions/Softmax" || last.Percentage != 0.0330329 {
		t.Errorf("last layer = %+v", last)
	}
	// Older files have no median; a zero total prints nan percentages.
	p, err = trt.ParseProfile([]byte("[\n  { \"count\" : 10 }\n, { \"name\" : \"a\", \"timeMs\" : 0, \"averageMs\" : 0, \"percentage\" : -nan }\n]\n"))
	if err != nil || p.Layers[0].MedianMs != nil || !math.IsNaN(p.Layers[0].Percentage) {
		t.Errorf("old profile: %+v, %v", p, err)
	}
}

func TestReadLayerInfoFixtures(t *testing.T) {
	li, err := trt.ReadLayerInfo(fixture(t, fxLayers8))
	if err != nil {
		t.Fatal(err)
	}
	if len(li.Layers) != 103 || !reflect.DeepEqual(li.Bindings, []string{"input_1", "predictions"}) {
		t.Fatalf("%d layers, bindings %v", len(li.Layers), li.Bindings)
	}
	c := li.Layers[1]
	if c.Name != "Conv__435 + resnet50/conv1_relu/Relu" || c.LayerType != "CaskConvolution" || c.TacticValue != "0xf64396b97c889179" ||
		len(c.Inputs) != 1 || !reflect.DeepEqual(c.Inputs[0].Dimensions, []int64{32, 3, 224, 224}) || c.Inputs[0].Format != "Row major linear FP32" || len(c.Raw) == 0 {
		t.Errorf("layer 1 = %+v", c)
	}
	li, err = trt.ReadLayerInfo(fixture(t, fxLayers1016))
	if err != nil {
		t.Fatal(err)
	}
	if len(li.Layers) != 9 || !reflect.DeepEqual(li.Bindings, []string{"x", "y", "z"}) {
		t.Fatalf("%d layers, bindings %v", len(li.Layers), li.Bindings)
	}
	l0 := li.Layers[0]
	if l0.StreamID == nil || *l0.StreamID != 0 || l0.Inputs[0].Location != "Device" ||
		!reflect.DeepEqual(l0.ONNXNodes(), []string{"[ONNX Layer: node_conv2d]", "[ONNX Layer: node_relu]"}) {
		t.Errorf("layer 0 = %+v nodes %q", l0, l0.ONNXNodes())
	}
	// Without detailed verbosity, layers are bare names.
	dir := t.TempDir()
	p := filepath.Join(dir, "names.json")
	os.WriteFile(p, []byte(`{"Layers": ["conv1", "relu1"], "Bindings": ["x", "y"]}`), 0o644)
	if li, err = trt.ReadLayerInfo(p); err != nil || li.Layers[1].Name != "relu1" {
		t.Errorf("names only: %+v, %v", li, err)
	}
}

// exportOutputSample is what trtexec's exportJSONOutput writes (the
// separators and line breaks of sampleReporting.cpp), with the values C++
// streams print: six significant digits, int64 in full, bool as 0/1, and
// nan/inf that strict JSON does not allow.
const exportOutputSample = `[
  { "name" : "y"
  , "dimensions" : "1x4"
  , "values" : [ 0.123457, -1e-05, nan, -inf ]
  }
, { "name" : "z"
  , "dimensions" : "2"
  , "values" : [ 9007199254740993, -3 ]
  }
, { "name" : "mask"
  , "dimensions" : "3"
  , "values" : [ 1, 0, 1 ]
  }
, { "name" : "s"
  , "dimensions" : ""
  , "values" : [ 42 ]
  }
]
`

func TestParseOutputs(t *testing.T) {
	outs, err := trt.ParseOutputs([]byte(exportOutputSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 4 || outs[0].Name != "y" || !reflect.DeepEqual(outs[0].Shape, []int64{1, 4}) || !reflect.DeepEqual(outs[3].Shape, []int64{}) {
		t.Fatalf("outputs = %+v", outs)
	}
	specs := []backend.OutputSpec{{Name: "s", DType: bundle.Int32}, {Name: "mask", DType: bundle.Bool}, {Name: "z", DType: bundle.Int64}, {Name: "y", DType: bundle.Float32}}
	ts, err := trt.OutputsFor(outs, specs)
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].Name != "s" || ts[0].Int64At(0) != 42 || len(ts[0].Shape) != 0 {
		t.Errorf("s = %+v", ts[0])
	}
	if !reflect.DeepEqual(ts[1].Data, []byte{1, 0, 1}) {
		t.Errorf("mask = %v", ts[1].Data)
	}
	// int64 values are exact, beyond float64's 2^53.
	if ts[2].Int64At(0) != 9007199254740993 || ts[2].Int64At(1) != -3 {
		t.Errorf("z = %d %d", ts[2].Int64At(0), ts[2].Int64At(1))
	}
	y := ts[3]
	if err := y.Validate(); err != nil {
		t.Fatal(err)
	}
	f32 := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(y.Data[4*i:])) }
	if f32(0) != float32(0.123457) || f32(1) != float32(-1e-05) || !math.IsNaN(float64(f32(2))) || !math.IsInf(float64(f32(3)), -1) {
		t.Errorf("y = %v %v %v %v", f32(0), f32(1), f32(2), f32(3))
	}
	// Other float dtypes.
	for _, dt := range []bundle.DType{bundle.Float16, bundle.BFloat16, bundle.Float64} {
		got, err := outs[0].Tensor(dt)
		if err != nil || got.Validate() != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if v := got.Float64At(0); math.Abs(v-0.123457) > 1e-3 {
			t.Errorf("%s: %v", dt, v)
		}
		if !math.IsNaN(got.Float64At(2)) || !math.IsInf(got.Float64At(3), -1) {
			t.Errorf("%s: non-finite values lost: %v %v", dt, got.Float64At(2), got.Float64At(3))
		}
	}
	if _, err := trt.OutputsFor(outs, []backend.OutputSpec{{Name: "missing", DType: bundle.Float32}}); err == nil || !strings.Contains(err.Error(), `"y", "z", "mask", "s"`) {
		t.Errorf("missing output: %v", err)
	}
	if _, err := outs[2].Tensor(bundle.Int8); err != nil {
		t.Errorf("bool values as int8: %v", err)
	}
	if _, err := outs[1].Tensor(bundle.Int8); err == nil {
		t.Error("9007199254740993 fit an int8")
	}
}

func TestParseOutputsRejects(t *testing.T) {
	for name, in := range map[string]string{
		"count mismatch": `[ { "name" : "y", "dimensions" : "2x2", "values" : [ 1, 2, 3 ] } ]`,
		"bad dims":       `[ { "name" : "y", "dimensions" : "2xq", "values" : [ 1 ] } ]`,
		"no name":        `[ { "dimensions" : "1", "values" : [ 1 ] } ]`,
		"truncated":      `[ { "name" : "y", "dimensions" : "1", "values" : [ 1`,
	} {
		if _, err := trt.ParseOutputs([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	outs, err := trt.ParseOutputs([]byte(`[ { "name" : "y", "dimensions" : "1", "values" : [ abc ] } ]`))
	if err == nil {
		if _, err := outs[0].Tensor(bundle.Float32); err == nil {
			t.Error("abc became a float")
		}
	}
}
