package trt_test

import (
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/trt"
)

func parseFixture(tb testing.TB, name string) *trt.Log {
	tb.Helper()
	l, err := trt.Parse(bytes.NewReader(readFixture(tb, name)))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return l
}

// f reads a number the way the log printed it: the parser must return
// exactly this value.
func f(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// want is one row of the table in fixtures/trtexec/SOURCES.md ("Values a
// parser should extract"), plus what the rest of the file states.
type want struct {
	status      string
	code, build int
	versionLine string
	version     trt.Version
	device, cc  string
	// The performance figures; a zero throughput means "(none)".
	throughput           string
	gpuMin, gpuMax       string
	gpuMean, gpuMedian   string
	p90, p95, p99        string
	walltime, gpuTotal   string
	warmup, timed        int
	unstableCoV          string // "" when there is no instability warning
	enqueueBound         bool
	noSummaryButPassed   bool
	uuid                 string
	deviceID             int // -1 when the log has no "Selected Device ID"
	smCount              int
	globalMiB            int64
	computeGHz, memGHz   string
	milestoneBuiltS      string
	milestoneEngineMiB   string
	commandHasMinShapes  string
	errorsContain        string
	unprefixedContinuous string // a continuation line kept with its error
}

var sourcesTable = map[string]want{
	fxTRT103: {
		status: "PASSED", code: 100300, versionLine: "10.3.0", version: trt.Version{Major: 10, Minor: 3},
		device: "NVIDIA RTX A5000", cc: "8.6",
		throughput: "191.317", gpuMin: "5.13742", gpuMax: "5.73645", gpuMean: "5.21617", gpuMedian: "5.1947",
		p90: "5.30127", p95: "5.33813", p99: "5.63098", walltime: "3.01593", gpuTotal: "3.00973",
		warmup: 40, timed: 577, unstableCoV: "1.57058",
		uuid: "GPU-bd38339f-9e6e-7f34-17ad-c1123627120b", deviceID: 0, smCount: 64, globalMiB: 24238,
		computeGHz: "1.695", memGHz: "8.001", milestoneBuiltS: "48.0138", milestoneEngineMiB: "51.3226",
	},
	fxTRT86: {
		status: "PASSED", code: 8600, versionLine: "8.6.0", version: trt.Version{Major: 8, Minor: 6},
		device: "NVIDIA GeForce RTX 3060 Laptop GPU", cc: "8.6",
		throughput: "295.434", gpuMin: "2.75659", gpuMax: "3.3689", gpuMean: "2.78581", gpuMedian: "2.77808",
		p90: "2.80469", p95: "2.81714", p99: "3.04541", walltime: "3.00575", gpuTotal: "2.4738",
		warmup: 59, timed: 888,
		deviceID: -1, smCount: 30, globalMiB: 6143, computeGHz: "1.702", memGHz: "7.001", milestoneBuiltS: "41.1653",
		commandHasMinShapes: "--minShapes=input:1x3x224x224",
	},
	fxTRT1016: {
		status: "PASSED", code: 101600, build: 72, versionLine: "10.16.0", version: trt.Version{Major: 10, Minor: 16, Build: 72},
		device: "NVIDIA RTX 6000 Ada Generation", cc: "8.9",
		throughput: "20235.1", gpuMin: "0.0266113", gpuMax: "0.288574", gpuMean: "0.0305783", gpuMedian: "0.0286865",
		p90: "0.034668", p95: "0.0378418", p99: "0.0493164", walltime: "3.00009", gpuTotal: "1.85632",
		warmup: 4028, timed: 60707, unstableCoV: "29.8349", enqueueBound: true,
		uuid: "GPU-6794f491-ac89-5cef-cdc5-a41123217fbd", deviceID: 0, smCount: 142, globalMiB: 48501,
		computeGHz: "2.505", memGHz: "10.001", milestoneBuiltS: "2.89985", milestoneEngineMiB: "12.5703",
	},
	fxDumpProfile: {
		status: "PASSED", code: 101600, build: 72, versionLine: "10.16.0", version: trt.Version{Major: 10, Minor: 16, Build: 72},
		device: "NVIDIA RTX 6000 Ada Generation", cc: "8.9", noSummaryButPassed: true,
		uuid: "GPU-6794f491-ac89-5cef-cdc5-a41123217fbd", deviceID: 0, smCount: 142, globalMiB: 48501,
		computeGHz: "2.505", memGHz: "10.001",
	},
	fxPluginFail: {
		status: "FAILED", code: 101600, build: 72, versionLine: "10.16.0", version: trt.Version{Major: 10, Minor: 16, Build: 72},
		device: "NVIDIA RTX 6000 Ada Generation", cc: "8.9",
		uuid: "GPU-6794f491-ac89-5cef-cdc5-a41123217fbd", deviceID: 0, smCount: 142, globalMiB: 48501,
		computeGHz: "2.505", memGHz: "10.001",
		errorsContain: "Plugin not found, are the plugin name, version, and namespace correct?",
		// The node dump continues the [E] line without a prefix.
		unprefixedContinuous: `op_type: "AddScalar"`,
	},
	fxTRT82Fail: {
		status: "FAILED", code: 8203, versionLine: "8.2.3", version: trt.Version{Major: 8, Minor: 2, Patch: 3},
		device: "NVIDIA GeForce GTX 1070", cc: "6.1",
		deviceID: -1, smCount: 16, globalMiB: 8111, computeGHz: "1.645", memGHz: "4.004",
		commandHasMinShapes: "--minShapes=x:0:1x1x28x28",
	},
}

// TestParseFixtures checks every fixture log against the values SOURCES.md
// lists for it, and every log in the folder has a row.
func TestParseFixtures(t *testing.T) {
	for _, name := range allLogs(t) {
		t.Run(name, func(t *testing.T) {
			w, ok := sourcesTable[name]
			if !ok {
				t.Fatalf("no expected values for fixture %s: add its row from SOURCES.md", name)
			}
			l := parseFixture(t, name)
			check := func(what string, got, want any) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("status", l.Status, w.status)
			check("running", l.Running, true)
			check("version code", l.VersionCode, w.code)
			check("build", l.Version.Build, w.build)
			check("version line", l.VersionLine, w.versionLine)
			check("version", l.Version, w.version)
			if l.Device == nil {
				t.Fatal("no device block")
			}
			d := l.Device
			check("device", d.Name, w.device)
			check("compute capability", d.ComputeCapability, w.cc)
			check("uuid", d.UUID, w.uuid)
			if w.deviceID < 0 {
				check("device id present", d.ID == nil, true)
			} else if d.ID == nil || *d.ID != w.deviceID {
				t.Errorf("device id = %v, want %d", d.ID, w.deviceID)
			}
			check("SMs", d.SMs, w.smCount)
			check("global memory", d.GlobalMemoryMiB, w.globalMiB)
			check("compute clock", d.ComputeClockGHz, f(w.computeGHz))
			check("memory clock", d.MemoryClockGHz, f(w.memGHz))
			if w.uuid != "" {
				if len(d.Available) != 1 || d.Available[0].UUID != w.uuid || d.Available[0].Name != w.device {
					t.Errorf("available devices = %+v", d.Available)
				}
			}
			if w.commandHasMinShapes != "" && !strings.Contains(l.Command, w.commandHasMinShapes) {
				t.Errorf("command %q lacks %s", l.Command, w.commandHasMinShapes)
			}
			if w.milestoneBuiltS != "" {
				check("engine built in", l.Milestones.EngineBuiltS, f(w.milestoneBuiltS))
			}
			if w.milestoneEngineMiB != "" {
				check("engine size", l.Milestones.EngineSizeMiB, f(w.milestoneEngineMiB))
			}

			if w.throughput == "" {
				if l.Summary != nil {
					t.Errorf("summary = %+v, want none", l.Summary)
				}
				check("warm-up", l.Warmup == nil, true)
				check("trace", l.Trace == nil, true)
			} else {
				s := l.Summary
				if s == nil {
					t.Fatal("no performance summary")
				}
				check("throughput", s.ThroughputQPS, f(w.throughput))
				g := s.GPUCompute
				if g == nil {
					t.Fatal("no GPU Compute Time line")
				}
				check("gpu min", g.MinMs, f(w.gpuMin))
				check("gpu max", g.MaxMs, f(w.gpuMax))
				check("gpu mean", g.MeanMs, f(w.gpuMean))
				check("gpu median", g.MedianMs, f(w.gpuMedian))
				for p, v := range map[float64]string{90: w.p90, 95: w.p95, 99: w.p99} {
					got, ok := g.Percentile(p)
					if !ok || got != f(v) {
						t.Errorf("gpu percentile(%g%%) = %v, %v, want %s", p, got, ok, v)
					}
				}
				check("walltime", s.TotalHostWalltimeS, f(w.walltime))
				check("total gpu", s.TotalGPUComputeS, f(w.gpuTotal))
				// All five distribution lines of the 8.4+ format, in order.
				var names []string
				for _, d := range s.Distributions() {
					names = append(names, d.Name)
					if len(d.Percentiles) != 3 {
						t.Errorf("%s has %d percentiles, want 3", d.Name, len(d.Percentiles))
					}
				}
				check("distributions", names, []string{"Latency", "Enqueue Time", "H2D Latency", "GPU Compute Time", "D2H Latency"})
				if l.Warmup == nil || l.Trace == nil {
					t.Fatalf("warm-up %v, trace %v", l.Warmup, l.Trace)
				}
				check("warm-up queries", l.Warmup.Queries, w.warmup)
				check("warm-up ms", l.Warmup.Ms, 200.0)
				check("timed queries", l.Trace.Queries, w.timed)
				check("trace seconds", l.Trace.Seconds, f(w.walltime))
			}
			cov, unstable := l.Unstable()
			if w.unstableCoV == "" {
				check("unstable", unstable, false)
			} else {
				check("coefficient of variance", cov, f(w.unstableCoV))
				for _, wn := range l.Warnings {
					if wn.Kind == trt.WarnUnstable && !strings.Contains(wn.Hint, "locking GPU clock frequency") {
						t.Errorf("instability hint = %q", wn.Hint)
					}
				}
			}
			check("enqueue-bound warning", l.HasWarning(trt.WarnEnqueueBound), w.enqueueBound)
			check("summary omitted", l.SummaryOmitted, w.noSummaryButPassed)
			if w.errorsContain != "" {
				all := strings.Join(l.Errors, "\n")
				if !strings.Contains(all, w.errorsContain) {
					t.Errorf("errors lack %q:\n%s", w.errorsContain, all)
				}
			}
			if w.unprefixedContinuous != "" {
				found := false
				for _, e := range l.Errors {
					if strings.Contains(e, "--- Begin node ---") && strings.Contains(e, w.unprefixedContinuous) {
						found = true
					}
				}
				if !found {
					t.Errorf("the node dump's unprefixed lines are not kept with their [E] line: %q", l.Errors)
				}
			}
			if w.status == "FAILED" && name == fxTRT82Fail && len(l.Errors) != 0 {
				t.Errorf("the stdout-only 8.2 log has errors %q, want none", l.Errors)
			}
		})
	}
}

// TestParseDetails covers what the table above does not: 10.16's own
// quirks, the per-layer profile, bindings, the option echo.
func TestParseDetails(t *testing.T) {
	t.Run("10.16 warnings", func(t *testing.T) {
		l := parseFixture(t, fxTRT1016)
		if !l.HasWarning(trt.WarnShapeOverride) {
			t.Error("the automatic shape override warning is not recognised")
		}
		if l.Options["Build Options"]["Precision"] != "FP32" || l.Options["Inference Options"]["Duration"] != "3s (+ 200ms warm up)" {
			t.Errorf("option echo: %v", l.Options)
		}
		want := []trt.Binding{{Input: true, Name: "x", Dimensions: "1x1x28x28", Type: "fp32"}, {Name: "y", Dimensions: "1x10", Type: "fp32"}, {Name: "z", Dimensions: "1", Type: "int64"}}
		if !reflect.DeepEqual(l.Bindings, want) {
			t.Errorf("bindings = %+v", l.Bindings)
		}
		if !reflect.DeepEqual(l.RandomInputs, []string{"x"}) {
			t.Errorf("random inputs = %v", l.RandomInputs)
		}
		m := l.Milestones
		if m.EngineGenerationS != 2.56061 || m.ActivationMemoryBytes != 125440 || m.WeightsMemoryBytes != 13100672 || m.ParseTimeS != 0.0204802 || m.ContextMemoryMiB != 0.119629 {
			t.Errorf("milestones = %+v", m)
		}
		lat := l.Summary.Latency
		if lat.MinMs != 0.0332031 || lat.MaxMs != 1.46887 {
			t.Errorf("latency = %+v", lat)
		}
	})
	t.Run("dumpProfile table", func(t *testing.T) {
		l := parseFixture(t, fxDumpProfile)
		p := l.Profile
		if p == nil || p.Iterations != 19952 || len(p.Layers) != 16 || p.Total == nil {
			t.Fatalf("profile = %+v", p)
		}
		first := trt.LayerTime{Name: "Reformatting CopyNode for Input Tensor 0 to node_conv2d + node_relu", TotalMs: 141.68, AvgMs: 0.0071, MedianMs: 0.0061, Percent: 9.6}
		if p.Layers[0] != first {
			t.Errorf("first layer = %+v", p.Layers[0])
		}
		if p.Total.TotalMs != 1469.76 || p.Total.Percent != 100 {
			t.Errorf("total = %+v", p.Total)
		}
		// The (sic) missing space of 10.16's message.
		found := false
		for _, w := range l.Warnings {
			found = found || w.Kind == trt.WarnShapeOverride && strings.Contains(w.Text, "xAutomatically setting shape")
		}
		if !found || !l.HasWarning(trt.WarnAuxStreams) {
			t.Errorf("warnings = %+v", l.Warnings)
		}
	})
	t.Run("8.6 option echo", func(t *testing.T) {
		l := parseFixture(t, fxTRT86)
		b := l.Options["Build Options"]
		if b["minTiming"] != "1" || b["Input build shape"] != "input=1x3x224x224+8x3x224x224+64x3x224x224" || b["Memory Pools"] != "workspace: default, dlaSRAM: default, dlaLocalDRAM: default, dlaGlobalDRAM: default" {
			t.Errorf("build options = %v", b)
		}
		if l.Milestones.PeakBuildCPUMiB != 0 || l.Milestones.ActivationMemoryBytes != 256901120 {
			t.Errorf("milestones = %+v", l.Milestones)
		}
	})
	t.Run("plugin failure", func(t *testing.T) {
		l := parseFixture(t, fxPluginFail)
		if !l.HasWarning(trt.WarnDeprecatedFlag) {
			t.Error("--plugins deprecation warning not recognised")
		}
		last := l.Errors[len(l.Errors)-4:]
		want := []string{"Failed to parse onnx file", "Parsing model failed", "Failed to create engine from model or file.", "Engine set up failed"}
		if !reflect.DeepEqual(last, want) {
			t.Errorf("error chain = %q", last)
		}
	})
	t.Run("8.2 device lines", func(t *testing.T) {
		l := parseFixture(t, fxTRT82Fail)
		if !l.Milestones.ParseFinished || l.Milestones.ParseTimeS != 0 {
			t.Errorf("8.2 'Finish parsing network model' = %+v", l.Milestones)
		}
		if l.Device.SharedMemoryPerSMKiB != 96 || l.Device.MemoryBusWidthBits != 256 || l.Device.ECC != "disabled" {
			t.Errorf("device = %+v", l.Device)
		}
	})
}

// TestParseFormats covers formats the fixtures lack but the reference
// documents from source: 8.0-8.2's End-to-End line and single percentile,
// fractional percentiles, scientific notation, CRLF, the other bound
// warnings, and lines longer than a buffer.
func TestParseFormats(t *testing.T) {
	log := strings.Join([]string{
		"&&&& RUNNING TensorRT.trtexec [TensorRT v8203] # trtexec --loadEngine=a.plan",
		"[05/07/2022-06:13:09] [I] === Performance summary ===",
		"[05/07/2022-06:13:09] [I] Throughput: 873.17 qps",
		"[05/07/2022-06:13:09] [I] Latency: min = 1.18591 ms, max = 1.36273 ms, mean = 1.20476 ms, median = 1.2041 ms, percentile(99%) = 1.22229 ms",
		"[05/07/2022-06:13:09] [I] End-to-End Host Latency: min = 2 ms, max = 3 ms, mean = 2.5 ms, median = 2.5 ms, percentile(99.9%) = 1e-05 ms\r",
		"[05/07/2022-06:13:09] [I] Some Future Metric: min = 1 ms, max = 2 ms, mean = 1.5 ms, median = 1.5 ms",
		"[05/07/2022-06:13:09] [I] Total Host Walltime: 3.00285 s",
		"[05/07/2022-06:13:09] [I] Total GPU Compute Time: 2.99571 s",
		"[05/07/2022-06:13:09] [W] * Throughput may be bound by host-to-device transfers for the inputs rather than GPU Compute and the GPU may be under-utilized.",
		"[05/07/2022-06:13:09] [W]   Add --noDataTransfers flag to disable data transfers.",
		"[05/07/2022-06:13:09] [W] * Multiple inference streams are used. Latencies may not be accurate since inferences may run in   parallel. Please use \"Throughput\" as the performance metric instead.",
		"[05/07/2022-06:13:09] [I] " + strings.Repeat("x", 3<<20),
		"&&&& PASSED TensorRT.trtexec [TensorRT v8203] # trtexec --loadEngine=a.plan",
	}, "\n")
	l, err := trt.Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	s := l.Summary
	if s == nil || s.ThroughputQPS != 873.17 || s.TotalGPUComputeS != 2.99571 {
		t.Fatalf("summary = %+v", s)
	}
	if p, ok := s.Latency.Percentile(99); !ok || p != 1.22229 {
		t.Errorf("latency p99 = %v %v", p, ok)
	}
	if s.EndToEnd == nil || s.EndToEnd.MeanMs != 2.5 {
		t.Errorf("end-to-end = %+v", s.EndToEnd)
	} else if p, ok := s.EndToEnd.Percentile(99.9); !ok || p != 1e-05 {
		t.Errorf("p99.9 = %v %v", p, ok)
	}
	if len(s.Other) != 1 || s.Other[0].Name != "Some Future Metric" {
		t.Errorf("other = %+v", s.Other)
	}
	if !l.HasWarning(trt.WarnH2DBound) || !l.HasWarning(trt.WarnMultiStream) || l.Warnings[0].Hint != "Add --noDataTransfers flag to disable data transfers." {
		t.Errorf("warnings = %+v", l.Warnings)
	}
	if l.Status != "PASSED" || l.Version != (trt.Version{Major: 8, Minor: 2, Patch: 3}) || l.Lines != 13 {
		t.Errorf("status %q version %v lines %d", l.Status, l.Version, l.Lines)
	}
}

// TestParseEmpty: nothing is not an error, and says nothing.
func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "garbage", "&&&& ", "[01/01/2026-00:00:00] [E]"} {
		l, err := trt.Parse(strings.NewReader(in))
		if err != nil || l == nil || l.Status != "" || l.Summary != nil {
			t.Errorf("Parse(%q) = %+v, %v", in, l, err)
		}
	}
}

// errReader fails after some bytes.
type errReader struct{ data []byte }

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestParseReadError(t *testing.T) {
	l, err := trt.Parse(&errReader{data: []byte("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # x\n")})
	if err == nil || l == nil || !l.Running {
		t.Errorf("Parse = %+v, %v; want the partial log and the read error", l, err)
	}
}
