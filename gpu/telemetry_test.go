package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeGPU is the state behind the telemetry functions of one mocked device;
// the test changes it between samples.
type fakeGPU struct {
	sm, mem, temp, power atomic.Uint32
	reasons              atomic.Uint64
	eccC, eccU           atomic.Uint64
	energy               atomic.Uint64
	eccRet               atomic.Int32 // nvml.Return of GetTotalEccErrors
	smRet                atomic.Int32 // nvml.Return of GetClockInfo(SM)
	smReads              atomic.Int64

	mu   sync.Mutex
	xids []uint64
}

func (f *fakeGPU) addXid(x uint64) {
	f.mu.Lock()
	f.xids = append(f.xids, x)
	f.mu.Unlock()
}

// telemetryServer is a DGX H100 whose device 2 answers the telemetry calls
// from a fakeGPU: an H100 at full boost, no reasons, no errors.
func telemetryServer(t *testing.T) (*server.Server, *server.Device, *fakeGPU) {
	t.Helper()
	srv := dgxh100.New()
	d := srv.Devices[2].(*server.Device)
	f := &fakeGPU{}
	f.sm.Store(1980)
	f.mem.Store(2619)
	f.temp.Store(45)
	f.power.Store(350_000)
	f.energy.Store(1_000_000)

	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			f.smReads.Add(1)
			return f.sm.Load(), nvml.Return(f.smRet.Load())
		case nvml.CLOCK_MEM:
			return f.mem.Load(), nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return f.reasons.Load(), nvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return f.reasons.Load(), nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) { return f.temp.Load(), nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return f.power.Load(), nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 97, Memory: 40}, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return f.energy.Load(), nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(typ nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c != nvml.VOLATILE_ECC {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if r := nvml.Return(f.eccRet.Load()); r != nvml.SUCCESS {
			return 0, r
		}
		if typ == nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
			return f.eccU.Load(), nvml.SUCCESS
		}
		return f.eccC.Load(), nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	var registered atomic.Uint64
	d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		registered.Store(types)
		return nvml.SUCCESS
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if len(f.xids) == 0 || registered.Load()&nvml.EventTypeXidCriticalError == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				x := f.xids[0]
				f.xids = f.xids[1:]
				return nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: x}, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	return srv, d, f
}

// measure starts a Monitor with a long interval (so only the first sample,
// at Start, and the last, at Stop, are taken), runs during, and stops.
func measure(t *testing.T, lib nvml.Interface, opts MonitorOptions, during func()) Report {
	t.Helper()
	m := NewMonitor(lib, opts)
	if err := m.Start(context.Background(), 2, time.Hour); err != nil {
		t.Fatal(err)
	}
	during()
	return m.Stop()
}

func TestMonitorVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    MonitorOptions
		during  func(f *fakeGPU)
		verdict Verdict
		check   func(t *testing.T, r Report)
	}{
		{"clean", MonitorOptions{}, func(f *fakeGPU) {}, VerdictOK, func(t *testing.T, r Report) {
			if r.Throttled || r.ClockUnstable || r.BusySamples != 2 || r.SMClockMaxMHz != 1980 || r.MaxPowerW != 350 {
				t.Errorf("report %+v", r)
			}
			if r.EnergyJ != 0 || len(r.Problems()) != 0 {
				t.Errorf("energy %v problems %q", r.EnergyJ, r.Problems())
			}
		}},
		{"idle and application clocks are not throttling", MonitorOptions{}, func(f *fakeGPU) {
			f.reasons.Store(ReasonGPUIdle | ReasonAppClocksSetting)
		}, VerdictOK, func(t *testing.T, r Report) {
			if r.Throttled || r.BusySamples != 1 {
				t.Errorf("throttled %v busy %d", r.Throttled, r.BusySamples)
			}
			last := r.Samples[len(r.Samples)-1]
			if !slices.Equal(last.ReasonNames, []string{"gpu_idle", "app_clocks_setting"}) || last.Throttled {
				t.Errorf("last sample %+v", last)
			}
		}},
		{"sw power cap", MonitorOptions{}, func(f *fakeGPU) { f.reasons.Store(ReasonSWPowerCap) }, VerdictRerun,
			func(t *testing.T, r Report) {
				if !r.Throttled || r.ThrottledSamples != 1 || !slices.Equal(r.ThrottleReasons, []string{"sw_power_cap"}) {
					t.Errorf("report %+v", r)
				}
			}},
		{"hw slowdown and power brake", MonitorOptions{}, func(f *fakeGPU) {
			f.reasons.Store(ReasonHWSlowdown | ReasonHWPowerBrake | ReasonGPUIdle)
		}, VerdictRerun, func(t *testing.T, r Report) {
			if !slices.Equal(r.ThrottleReasons, []string{"hw_slowdown", "hw_power_brake"}) {
				t.Errorf("reasons %q", r.ThrottleReasons)
			}
			if p := strings.Join(r.Problems(), "\n"); !strings.Contains(p, "hw_power_brake") {
				t.Errorf("problems %q", p)
			}
		}},
		{"thermal", MonitorOptions{}, func(f *fakeGPU) {
			f.reasons.Store(ReasonSWThermal | ReasonHWThermal)
			f.temp.Store(91)
		}, VerdictRerun, func(t *testing.T, r Report) {
			if r.MaxTemperatureC != 91 || !slices.Equal(r.ThrottleReasons, []string{"sw_thermal", "hw_thermal"}) {
				t.Errorf("report %+v", r)
			}
		}},
		{"clock dropped without a reason", MonitorOptions{}, func(f *fakeGPU) { f.sm.Store(1600) }, VerdictRerun,
			func(t *testing.T, r Report) {
				if !r.ClockUnstable || r.SMClockMinMHz != 1600 || r.SMClockMaxMHz != 1980 || r.ClockVariation < 0.19 {
					t.Errorf("report %+v", r)
				}
			}},
		{"small clock move within tolerance", MonitorOptions{}, func(f *fakeGPU) { f.sm.Store(1965) }, VerdictOK, nil},
		{"tolerance option", MonitorOptions{ClockTolerance: 0.005}, func(f *fakeGPU) { f.sm.Store(1965) }, VerdictRerun, nil},
		{"energy", MonitorOptions{}, func(f *fakeGPU) { f.energy.Add(52_500) }, VerdictOK, func(t *testing.T, r Report) {
			if r.EnergyJ != 52.5 {
				t.Errorf("energy %v J, want 52.5", r.EnergyJ)
			}
		}},
		{"corrected ECC only", MonitorOptions{}, func(f *fakeGPU) { f.eccC.Add(3) }, VerdictOK, func(t *testing.T, r Report) {
			if r.ECCCorrectedNew != 3 || r.ECCUncorrectedNew != 0 {
				t.Errorf("ecc %d/%d", r.ECCCorrectedNew, r.ECCUncorrectedNew)
			}
		}},
		{"uncorrected ECC", MonitorOptions{}, func(f *fakeGPU) { f.eccU.Add(1) }, VerdictReject, func(t *testing.T, r Report) {
			if r.ECCUncorrectedNew != 1 {
				t.Errorf("ecc uncorrected new %d", r.ECCUncorrectedNew)
			}
		}},
		{"xid", MonitorOptions{}, func(f *fakeGPU) { f.addXid(79) }, VerdictReject, func(t *testing.T, r Report) {
			if len(r.Xids) != 1 || r.Xids[0].Xid != 79 || r.Xids[0].Ignored {
				t.Errorf("xids %+v", r.Xids)
			}
			if p := strings.Join(r.Problems(), "\n"); !strings.Contains(p, "Xid 79") {
				t.Errorf("problems %q", p)
			}
		}},
		{"ignored xid", MonitorOptions{IgnoreXids: []uint64{13, 43}}, func(f *fakeGPU) { f.addXid(43) }, VerdictOK,
			func(t *testing.T, r Report) {
				if len(r.Xids) != 1 || !r.Xids[0].Ignored {
					t.Errorf("xids %+v", r.Xids)
				}
			}},
		{"errors outrank throttling", MonitorOptions{}, func(f *fakeGPU) {
			f.reasons.Store(ReasonSWPowerCap)
			f.eccU.Add(2)
		}, VerdictReject, nil},
		{"gpu lost", MonitorOptions{}, func(f *fakeGPU) { f.smRet.Store(int32(nvml.ERROR_GPU_IS_LOST)) }, VerdictReject,
			func(t *testing.T, r Report) {
				if !r.GPULost || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "ERROR_GPU_IS_LOST") {
					t.Errorf("lost %v errors %q", r.GPULost, r.Errors)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _, f := telemetryServer(t)
			r := measure(t, srv, tc.opts, func() { tc.during(f) })
			if !r.Monitored || r.SampleCount != 2 || len(r.Samples) != 2 || r.Device != 2 || r.UUID == "" {
				t.Fatalf("report basics: %+v", r)
			}
			if len(r.Unsupported) != 0 {
				t.Errorf("unsupported on a full mock: %q", r.Unsupported)
			}
			if got := r.Verdict(); got != tc.verdict {
				t.Errorf("Verdict() = %q, want %q (problems %q)", got, tc.verdict, r.Problems())
			}
			if (tc.verdict == VerdictOK) != (len(r.Problems()) == 0) {
				t.Errorf("problems %q with verdict %q", r.Problems(), tc.verdict)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if c := nvmlCalls(srv); c["Init"] != 1 || c["Shutdown"] != 1 {
				t.Errorf("Init/Shutdown: %v", c)
			}
		})
	}
}

// TestMonitorDegrades: a GeForce-like GPU without ECC, on an old driver
// without clock event reasons (only the deprecated throttle reasons), and
// a driver with neither.
func TestMonitorDegrades(t *testing.T) {
	t.Parallel()
	t.Run("no ECC, old reasons function", func(t *testing.T) {
		t.Parallel()
		srv, d, f := telemetryServer(t)
		f.eccRet.Store(int32(nvml.ERROR_NOT_SUPPORTED))
		srv.LookupSymbolFunc = func(s string) error {
			if s == symClocksEvent {
				return errors.New("undefined symbol")
			}
			return nil
		}
		r := measure(t, srv, MonitorOptions{}, func() { f.reasons.Store(ReasonHWSlowdown) })
		if !slices.Equal(r.Unsupported, []string{"ecc"}) || r.Verdict() != VerdictRerun {
			t.Errorf("unsupported %q verdict %q", r.Unsupported, r.Verdict())
		}
		c := nvmlCalls(d)
		if c["GetCurrentClocksEventReasons"] != 0 || c["GetCurrentClocksThrottleReasons"] != 2 {
			t.Errorf("reasons calls %v", c)
		}
		if c["GetTotalEccErrors"] != 1 {
			t.Errorf("unsupported ECC read %d times, want once", c["GetTotalEccErrors"])
		}
	})
	t.Run("nothing optional", func(t *testing.T) {
		t.Parallel()
		srv, d, f := telemetryServer(t)
		srv.LookupSymbolFunc = func(s string) error { return fmt.Errorf("undefined symbol: %s", s) }
		r := measure(t, srv, MonitorOptions{}, func() { f.reasons.Store(ReasonHWSlowdown) })
		for _, want := range []string{"clock_event_reasons", "temperature", "utilization", "ecc", "energy", "xid_events"} {
			if !slices.Contains(r.Unsupported, want) {
				t.Errorf("unsupported %q lacks %q", r.Unsupported, want)
			}
		}
		if r.Verdict() != VerdictOK || r.SMClockMaxMHz != 1980 || r.BusySamples != 2 {
			t.Errorf("verdict %q report %+v", r.Verdict(), r)
		}
		c := nvmlCalls(d)
		for _, fn := range []string{"GetCurrentClocksEventReasons", "GetCurrentClocksThrottleReasons", "GetTemperature",
			"GetTotalEccErrors", "GetTotalEnergyConsumption", "GetSupportedEventTypes", "GetUtilizationRates"} {
			if c[fn] != 0 {
				t.Errorf("%s called though missing", fn)
			}
		}
		if nvmlCalls(srv)["EventSetCreate"] != 0 {
			t.Error("EventSetCreate called though missing")
		}
	})
	t.Run("no xid events on this GPU", func(t *testing.T) {
		t.Parallel()
		srv, d, _ := telemetryServer(t)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypePState, nvml.SUCCESS }
		r := measure(t, srv, MonitorOptions{}, func() {})
		if !slices.Equal(r.Unsupported, []string{"xid_events"}) || nvmlCalls(srv)["EventSetCreate"] != 0 {
			t.Errorf("unsupported %q", r.Unsupported)
		}
	})
}

func TestMonitorSamplesUntilStop(t *testing.T) {
	t.Parallel()
	srv, _, f := telemetryServer(t)
	m := NewMonitor(srv, MonitorOptions{MaxSamples: 3})
	if err := m.Start(context.Background(), 2, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.smReads.Load() >= 6 })
	f.reasons.Store(ReasonSWPowerCap)
	r := m.Stop()
	if r.SampleCount < 7 || len(r.Samples) != 3 || !r.SamplesTruncated {
		t.Errorf("samples: count %d kept %d truncated %v", r.SampleCount, len(r.Samples), r.SamplesTruncated)
	}
	if !r.Throttled || r.Verdict() != VerdictRerun {
		t.Errorf("the last sample's throttling was lost though samples were truncated: %+v", r)
	}
	// The goroutine has ended: no reads after Stop.
	n := f.smReads.Load()
	time.Sleep(5 * time.Millisecond)
	if f.smReads.Load() != n {
		t.Error("sampling continued after Stop")
	}
	select {
	case <-m.done:
	default:
		t.Error("sampling goroutine not finished")
	}
}

func TestMonitorContextEnds(t *testing.T) {
	t.Parallel()
	srv, _, f := telemetryServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := NewMonitor(srv, MonitorOptions{})
	if err := m.Start(ctx, 2, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.smReads.Load() >= 3 })
	cancel()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatal("sampling goroutine did not end with its context")
	}
	r := m.Stop()
	if !r.Monitored || r.SampleCount < 3 {
		t.Errorf("report after context end: %+v", r)
	}
	if c := nvmlCalls(srv); c["Shutdown"] != 1 {
		t.Errorf("Shutdown calls %v", c)
	}
}

func TestMonitorLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("stop without start", func(t *testing.T) {
		t.Parallel()
		lib := &mock.Interface{}
		m := NewMonitor(lib, MonitorOptions{})
		r := m.Stop()
		if r.Monitored || r.Verdict() != VerdictOK || len(r.Problems()) != 0 {
			t.Errorf("report %+v", r)
		}
		if c := nvmlCalls(lib); len(c) != 0 {
			t.Errorf("NVML called: %v", c)
		}
		if err := m.Start(context.Background(), 0, 0); err == nil {
			t.Error("Start after Stop: no error")
		}
		m.Stop()
	})
	t.Run("start twice, stop many times at once", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := telemetryServer(t)
		m := NewMonitor(srv, MonitorOptions{})
		if err := m.Start(context.Background(), 2, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background(), 2, time.Millisecond); err == nil {
			t.Error("second Start: no error")
		}
		var wg sync.WaitGroup
		counts := make([]int, 8)
		for i := range counts {
			wg.Go(func() { counts[i] = m.Stop().SampleCount })
		}
		wg.Wait()
		for _, c := range counts {
			if c != counts[0] || c < 2 {
				t.Errorf("Stop results differ: %v", counts)
				break
			}
		}
		if c := nvmlCalls(srv); c["Init"] != 1 || c["Shutdown"] != 1 {
			t.Errorf("Init/Shutdown %v", c)
		}
	})
	t.Run("no such GPU", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := telemetryServer(t)
		m := NewMonitor(srv, MonitorOptions{})
		err := m.Start(context.Background(), 8, 0)
		var ne *NVMLError
		if !errors.As(err, &ne) || ne.Ret != nvml.ERROR_INVALID_ARGUMENT {
			t.Fatalf("err = %v", err)
		}
		if c := nvmlCalls(srv); c["Init"] != 1 || c["Shutdown"] != 1 {
			t.Errorf("Init/Shutdown %v", c)
		}
		if r := m.Stop(); r.Monitored {
			t.Error("report of a failed Start is monitored")
		}
	})
	t.Run("no driver", func(t *testing.T) {
		t.Parallel()
		lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
		m := NewMonitor(lib, MonitorOptions{})
		if err := m.Start(context.Background(), 0, 0); err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
			t.Errorf("err = %v", err)
		}
		m.Stop()
		if c := nvmlCalls(lib); len(c) != 1 || c["Init"] != 1 {
			t.Errorf("NVML calls after a failed Init: %v", c)
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		t.Parallel()
		lib := &mock.Interface{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := NewMonitor(lib, MonitorOptions{}).Start(ctx, 0, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	})
}

// TestMonitorRealLibrary: on this machine the real NVML is absent; Start
// fails cleanly and Stop is harmless.
func TestMonitorRealLibrary(t *testing.T) {
	t.Parallel()
	m := NewMonitor(DefaultLibrary(), MonitorOptions{})
	err := m.Start(context.Background(), 0, 0)
	if err == nil {
		r := m.Stop()
		t.Skipf("this machine has a GPU: %s", r.Text())
	}
	t.Logf("Start: %v", err)
	if r := m.Stop(); r.Monitored || r.Verdict() != VerdictOK {
		t.Errorf("report %+v", r)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	srv, _, _ := telemetryServer(t)
	r, err := Snapshot(context.Background(), srv, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.SampleCount != 2 || r.Verdict() != VerdictOK {
		t.Errorf("snapshot %+v", r)
	}
	txt := r.Text()
	for _, want := range []string{"gpu 2", "sm 1980 MHz", "mem 2619 MHz", "45 C", "350.0 W", "verdict ok"} {
		if !strings.Contains(txt, want) {
			t.Errorf("Text() lacks %q: %s", want, txt)
		}
	}
	if _, err := Snapshot(context.Background(), &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}, 0); err == nil {
		t.Error("Snapshot without a driver: no error")
	}
}

func TestReasonNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mask      uint64
		want      []string
		throttled bool
	}{
		{0, nil, false},
		{0x1, []string{"gpu_idle"}, false},
		{0x2, []string{"app_clocks_setting"}, false},
		{0x3, []string{"gpu_idle", "app_clocks_setting"}, false},
		{0x4, []string{"sw_power_cap"}, true},
		{0x8, []string{"hw_slowdown"}, true},
		{0x10, []string{"sync_boost"}, true},
		{0x20, []string{"sw_thermal"}, true},
		{0x40, []string{"hw_thermal"}, true},
		{0x80, []string{"hw_power_brake"}, true},
		{0x100, []string{"display_clock_setting"}, true},
		{0x200, []string{"board_limit"}, true},
		{0x400, []string{"reliability"}, true},
		{0x24, []string{"sw_power_cap", "sw_thermal"}, true},
		{0x1801, []string{"gpu_idle", "reason_0x800", "reason_0x1000"}, true},
	}
	for _, tc := range tests {
		if got := ReasonNames(tc.mask); !slices.Equal(got, tc.want) {
			t.Errorf("ReasonNames(%#x) = %q, want %q", tc.mask, got, tc.want)
		}
		if got := Throttling(tc.mask) != 0; got != tc.throttled {
			t.Errorf("Throttling(%#x) != 0 is %v, want %v", tc.mask, got, tc.throttled)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// OnSample hears every sample, as the report counts them, with the device
// index; OnStop comes once, after the last (a worker's GPU gauges are set
// from the first and removed by the second).
func TestMonitorHooks(t *testing.T) {
	t.Parallel()
	srv, _, f := telemetryServer(t)
	var mu sync.Mutex
	var heard []Sample
	stops, afterStop := 0, 0
	m := NewMonitor(srv, MonitorOptions{
		OnSample: func(dev int, s Sample) {
			mu.Lock()
			defer mu.Unlock()
			if dev != 2 || stops > 0 {
				afterStop++
			}
			heard = append(heard, s)
		},
		OnStop: func(dev int) {
			mu.Lock()
			defer mu.Unlock()
			if dev == 2 {
				stops++
			}
		},
	})
	if err := m.Start(context.Background(), 2, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.smReads.Load() >= 3 })
	f.temp.Store(81)
	f.reasons.Store(ReasonHWThermal)
	r := m.Stop()
	m.Stop()
	mu.Lock()
	defer mu.Unlock()
	last := heard[len(heard)-1]
	if len(heard) != r.SampleCount || stops != 1 || afterStop != 0 {
		t.Fatalf("heard %d samples (report %d), %d stops, %d out of place", len(heard), r.SampleCount, stops, afterStop)
	}
	if last.TemperatureC != 81 || last.SMClockMHz != 1980 || last.PowerMW != 350_000 || !slices.Equal(last.ReasonNames, []string{"hw_thermal"}) {
		t.Errorf("last sample %+v, want the GPU as it was at Stop", last)
	}
}
