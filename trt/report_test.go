package trt_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/trt"
)

// TestReportFixtures renders what `worker trt-log FILE [-o json]` prints
// for every fixture: every figure of the summary, the device, warnings,
// status and failure class, in text and in JSON.
func TestReportFixtures(t *testing.T) {
	wantText := map[string][]string{
		fxTRT103: {"status:        PASSED (exit status 0; stage benchmark)", "TensorRT 10.3.0 (banner v100300", "NVIDIA RTX A5000", "CC 8.6",
			"Throughput               191.317 qps", "GPU Compute Time         min 5.13742, max 5.73645, mean 5.21617, median 5.1947, p90 5.30127, p95 5.33813, p99 5.63098 ms",
			"D2H Latency", "Total Host Walltime      3.01593 s", "Total GPU Compute Time   3.00973 s", "warm-up:       40 queries over 200 ms", "timed:         577 queries over 3.01593 s",
			"[gpu-compute-unstable] * GPU compute time is unstable, with coefficient of variance = 1.57058%.", "result:        ok"},
		fxTRT1016:     {"TensorRT 10.16.0.72", "Throughput               20235.1 qps", "[enqueue-bound]", "29.8349%", "binding:       output z 1 int64"},
		fxTRT86:       {"TensorRT 8.6.0", "Throughput               295.434 qps", "NVIDIA GeForce RTX 3060 Laptop GPU"},
		fxDumpProfile: {"summary:       not printed: a profiler was attached", "layer profile: 16 layers over 19952 iterations", "result:        permanent runtime failure (no-summary)"},
		fxPluginFail:  {"status:        FAILED (exit status 1", "result:        permanent build failure (plugin-not-found, operator AddScalar)", `    op_type: "AddScalar"`, "evidence: Failed to parse onnx file"},
		fxTRT82Fail:   {"TensorRT 8.2.3", "NVIDIA GeForce GTX 1070", "permanent build failure (failed-without-detail)"},
	}
	for _, name := range allLogs(t) {
		t.Run(name, func(t *testing.T) {
			r, err := trt.DescribeFile(fixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			want, ok := wantText[name]
			if !ok {
				t.Fatalf("no expected report for %s", name)
			}
			for _, w := range want {
				if !strings.Contains(text.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, text.String())
				}
			}
			var js bytes.Buffer
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back trt.Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if back.Log.Status != r.Log.Status || back.Classification.Kind != r.Classification.Kind || back.Log.Version != r.Log.Version {
				t.Errorf("JSON round trip: %+v", back)
			}
			if r.Log.Summary != nil && back.Log.Summary.GPUCompute.MedianMs != r.Log.Summary.GPUCompute.MedianMs {
				t.Error("JSON lost the summary")
			}
		})
	}
	// The JSON keys a script would use.
	r, _ := trt.DescribeFile(fixture(t, fxTRT103))
	var js bytes.Buffer
	r.WriteJSON(&js)
	for _, k := range []string{`"throughput_qps": 191.317`, `"gpu_compute_time": {`, `"median_ms": 5.1947`, `"p": 99`, `"total_host_walltime_s": 3.01593`, `"kind": "gpu-compute-unstable"`, `"value": 1.57058`, `"broken_worker": false`, `"compute_capability": "8.6"`} {
		if !strings.Contains(js.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}
