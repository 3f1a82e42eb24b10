package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/metrics"
)

// fakeH100 is go-nvml's DGX H100 mock whose device 1 reports telemetry
// from atomics the test sets; the optional readings beyond temperature and
// clock event reasons are absent, as on an older driver.
type fakeH100 struct {
	srv                 *server.Server
	temp, sm, mw, reads atomic.Uint32
	reasons             atomic.Uint64
}

func newFakeH100() *fakeH100 {
	f := &fakeH100{srv: dgxh100.New()}
	f.temp.Store(41)
	f.sm.Store(1980)
	f.mw.Store(312_500)
	d := f.srv.Devices[1].(*server.Device)
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_SM {
			f.reads.Add(1)
		}
		return f.sm.Load(), nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return f.reasons.Load(), nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return f.temp.Load(), nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return f.mw.Load(), nvml.SUCCESS }
	f.srv.LookupSymbolFunc = func(s string) error {
		if s == "nvmlDeviceGetCurrentClocksEventReasons" || s == "nvmlDeviceGetTemperature" {
			return nil
		}
		return errors.New("undefined symbol: " + s)
	}
	return f
}

// A GPU's gauges follow its telemetry while a monitor watches it (as a
// worker's does during each benchmark), and are gone once it stops.
func TestGPUGaugesFollowTheMonitor(t *testing.T) {
	w := metrics.NewWorker([]string{"gpu.h100"})
	f := newFakeH100()
	m := gpu.NewMonitor(f.srv, gpu.MonitorOptions{OnSample: w.GPUSample, OnStop: w.GPUStopped})
	if err := m.Start(context.Background(), 1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.temp.Store(83)
	f.sm.Store(1410)
	f.reasons.Store(gpu.ReasonSWThermal | gpu.ReasonSWPowerCap)
	// Polled, not slept: the sampler may be slow on a loaded machine.
	want := []string{
		`tunefleet_gpu_temperature_celsius{gpu="1"} 83`,
		`tunefleet_gpu_sm_clock_mhz{gpu="1"} 1410`,
		`tunefleet_gpu_power_watts{gpu="1"} 312.5`,
		`tunefleet_gpu_throttle_reasons{gpu="1",reason="sw_thermal"} 1`,
		`tunefleet_gpu_throttle_reasons{gpu="1",reason="sw_power_cap"} 1`,
		`tunefleet_gpu_throttle_reasons{gpu="1",reason="hw_slowdown"} 0`,
	}
	var got string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		got = gathered(t, w)
		if containsAll(got, want) || time.Now().After(deadline) {
			break
		}
	}
	for _, s := range want {
		if !strings.Contains(got, s+"\n") {
			t.Errorf("while benchmarking, /metrics lacks %s", s)
		}
	}
	m.Stop()
	if got := gathered(t, w); strings.Contains(got, `gpu="1"`) {
		t.Errorf("GPU 1's gauges outlived its monitor:\n%s", grep(got, `gpu="1"`))
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w+"\n") {
			return false
		}
	}
	return true
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
