package gpu

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRealGPU runs the real NVML of a machine with an NVIDIA GPU. It runs
// only with TUNEFLEET_REAL_GPU=1, which internal/testkit/gpucheck/gpu-check.sh
// sets on a GPU machine (docs/development.md, "On a GPU machine"); on
// machines without a driver TestDetectDefaultHere and TestMonitorRealLibrary
// cover the other side. It checks every field a platform key is made of and
// watches the GPU for TUNEFLEET_REAL_GPU_WATCH (default 4s) while the script
// keeps it busy: a Monitor on a real driver must give samples with clocks,
// power and temperature, and a verdict that does not reject a healthy GPU.
func TestRealGPU(t *testing.T) {
	if os.Getenv("TUNEFLEET_REAL_GPU") != "1" {
		t.Skip("TUNEFLEET_REAL_GPU=1 is set by gpu-check.sh on a machine with an NVIDIA GPU")
	}
	ctx := context.Background()
	fp, err := DetectDefault(ctx, DetectOptions{RequireGPU: true})
	if err != nil {
		t.Fatalf("DetectDefault on a GPU machine: %v", err)
	}
	js, _ := json.MarshalIndent(fp, "", "  ")
	t.Logf("fingerprint:\n%s", js)
	t.Logf("platform key %s, class %s", fp.PlatformKey(), fp.Class())
	if fp.Kind != KindGPU || len(fp.GPUs) == 0 {
		t.Fatalf("kind %q with %d GPUs", fp.Kind, len(fp.GPUs))
	}
	if fp.DriverVersion == "" || fp.CUDADriverVersion == "" {
		t.Errorf("driver %q, CUDA driver %q: both must be read", fp.DriverVersion, fp.CUDADriverVersion)
	}
	for _, g := range fp.GPUs {
		if g.Name == "" || !strings.HasPrefix(g.UUID, "GPU-") && !strings.HasPrefix(g.UUID, "MIG-") ||
			!strings.Contains(g.ComputeCapability, ".") || g.MemoryTotal == 0 || g.PCIBusID == "" {
			t.Errorf("GPU %d incomplete: %+v", g.Index, g)
		}
	}
	if key := fp.PlatformKey(); !strings.HasPrefix(key, "gpu-nvidia-") || !strings.Contains(key, fp.GPUs[0].SM()) {
		t.Errorf("platform key %q: want gpu-nvidia-… with %s", key, fp.GPUs[0].SM())
	}
	if c := fp.Class(); !strings.HasPrefix(c, "gpu.") {
		t.Errorf("class %q: want gpu.<model>", c)
	}

	watch := 4 * time.Second
	if v := os.Getenv("TUNEFLEET_REAL_GPU_WATCH"); v != "" {
		if watch, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TUNEFLEET_REAL_GPU_WATCH=%q: %v", v, err)
		}
	}
	m := NewMonitor(DefaultLibrary(), MonitorOptions{})
	if err := m.Start(ctx, fp.GPUs[0].Index, 100*time.Millisecond); err != nil {
		t.Fatalf("Monitor.Start on GPU %d: %v", fp.GPUs[0].Index, err)
	}
	time.Sleep(watch)
	r := m.Stop()
	t.Logf("telemetry over %s:\n%s", watch, r.Text())
	rs, _ := json.Marshal(struct {
		Busy, Count                    int
		SMMin, SMMax                   uint32
		MaxTempC                       uint32
		MaxPowerW, MeanPowerW, EnergyJ float64
		Throttled                      bool
		Reasons, Unsupported, Errors   []string
		Verdict                        Verdict
	}{r.BusySamples, r.SampleCount, r.SMClockMinMHz, r.SMClockMaxMHz, r.MaxTemperatureC, r.MaxPowerW, r.MeanPowerW, r.EnergyJ,
		r.Throttled, r.ThrottleReasons, r.Unsupported, r.Errors, r.Verdict()})
	t.Logf("summary: %s", rs)
	if !r.Monitored || r.SampleCount < int(watch/(100*time.Millisecond))/2 {
		t.Errorf("monitored %v with %d samples in %s at 100ms", r.Monitored, r.SampleCount, watch)
	}
	if len(r.Samples) > 0 {
		s := r.Samples[len(r.Samples)-1]
		if s.SMClockMHz == 0 || s.MemClockMHz == 0 || s.PowerMW == 0 || s.TemperatureC == 0 {
			t.Errorf("last sample lacks a reading: %+v (unsupported %v)", s, r.Unsupported)
		}
	}
	if r.Verdict() == VerdictReject {
		t.Errorf("a healthy GPU's telemetry rejected: %v", r.Problems())
	}
}
