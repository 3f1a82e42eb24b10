package trt_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/trt"
)

// FuzzParse: Parse never panics and never fails on content, and whatever
// it returns can be classified at every stage and rendered both ways (the
// JSON report must stay encodable: no NaN or Inf gets into a Log).
func FuzzParse(f *testing.F) {
	for _, name := range allLogs(f) {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte("&&&& RUNNING TensorRT.trtexec [TensorRT v99999999999] [b] # x\n[01/01/2026-00:00:00] [I] === Performance summary ===\n[01/01/2026-00:00:00] [I] Throughput: nan qps\n[01/01/2026-00:00:00] [I] Latency: min = inf ms, percentile(%) = 1 ms\n"))
	f.Add([]byte("[01/01/2026-00:00:00] [I] === Profile (x iterations ) ===\n[01/01/2026-00:00:00] [I]   nan inf 1 2 name\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := trt.Parse(bytes.NewReader(data))
		if err != nil || l == nil {
			t.Fatalf("Parse = %v, %v", l, err)
		}
		for _, st := range []trt.Stage{trt.StageAuto, trt.StageBuild, trt.StageRun, trt.StageBenchmark, trt.StageVersion} {
			for _, ex := range []trt.ExitStatus{trt.InferExit(l), {Code: 1}, {Code: 0}, {Code: -1, Signal: 6}} {
				c := trt.Classify(l, ex, st)
				if c.OK == (c.Class != "") || c.Retryable != c.Class.Retryable() {
					t.Fatalf("inconsistent classification %+v", c)
				}
			}
		}
		r, err := trt.Describe(bytes.NewReader(data), trt.ExitStatus{Code: -1, Unknown: true}, trt.StageAuto)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(io.Discard); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if _, err := trt.ParseBanner(string(data)); err == nil && len(data) == 0 {
			t.Fatal("a version from nothing")
		}
	})
}

// FuzzExports: the tolerant JSON readers never panic, and the outputs they
// accept convert to every dtype without panicking.
func FuzzExports(f *testing.F) {
	for _, name := range []string{fxTimes, fxProfile, fxLayers8, fxLayers1016} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(exportOutputSample))
	f.Add([]byte(`[ { "name" : "y", "dimensions" : "1000000x1000000x1000000", "values" : [ ] } ]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if recs, err := trt.ParseTimes(data); err == nil {
			if durs, err := trt.Latencies(recs); err == nil && len(durs) > 0 {
				trt.ApplyStopRule(1, durs, backend.DefaultStopRule())
			}
		}
		trt.ParseProfile(data)
		outs, err := trt.ParseOutputs(data)
		if err != nil {
			return
		}
		for _, o := range outs {
			for _, dt := range []bundle.DType{bundle.Float32, bundle.Float16, bundle.BFloat16, bundle.Float64, bundle.Int8, bundle.Uint8, bundle.Int32, bundle.Int64, bundle.Uint64, bundle.Bool} {
				if tt, err := o.Tensor(dt); err == nil {
					if err := tt.Validate(); err != nil {
						t.Fatalf("%s: %v", dt, err)
					}
				}
			}
		}
	})
}
