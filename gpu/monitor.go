package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MonitorOptions tune a Monitor. The zero value is usable.
type MonitorOptions struct {
	// ClockTolerance is the largest relative SM clock spread over busy
	// samples that still counts as stable; 0 means 0.05 (5 %).
	ClockTolerance float64
	// MaxSamples bounds Report.Samples; 0 means 4096. Aggregates cover
	// every sample regardless.
	MaxSamples int
	// IgnoreXids are Xid codes recorded but not held against the
	// measurement (as k8s-device-plugin lets operators skip some).
	IgnoreXids []uint64
	// OnSample, if set, hears every sample as it is taken, with the NVML
	// index of its GPU: a worker exports them as gauges while it
	// benchmarks. It is called with the monitor's lock held and must be
	// quick.
	OnSample func(device int, s Sample)
	// OnStop, if set, is called once when sampling has ended, after the
	// last OnSample.
	OnStop func(device int)
}

// Monitor samples one GPU while a benchmark runs. Start it before the
// benchmark and Stop it after; Stop is idempotent, safe without Start and
// waits for the sampling goroutine to end. A Monitor is used once.
type Monitor struct {
	lib  nvml.Interface
	opts MonitorOptions

	stopOnce sync.Once
	final    Report

	mu      sync.Mutex // guards everything below
	state   int
	cancel  context.CancelFunc
	done    chan struct{}
	dev     nvml.Device
	skip    [nFields]bool
	reasons func() (uint64, nvml.Return)
	events  nvml.EventSet
	rep     Report

	eccBase     [2]uint64
	eccBaseOK   bool
	energyStart uint64
	energyOK    bool
	throttleAll uint64
	powerSum    float64
	powerN      int
	errSeen     map[string]bool
}

const (
	stateIdle = iota
	stateRunning
	stateStopped
)

// NewMonitor returns a Monitor that reads GPUs through lib.
func NewMonitor(lib nvml.Interface, opts MonitorOptions) *Monitor {
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 0.05
	}
	if opts.MaxSamples <= 0 {
		opts.MaxSamples = 4096
	}
	return &Monitor{lib: lib, opts: opts}
}

// Start initialises NVML, opens the GPU with NVML index index, takes a first
// sample and then samples every interval (DefaultInterval when 0) until
// Stop or until ctx ends. It fails when NVML cannot be initialised (no
// driver), when there is no such GPU, or when the Monitor was started or
// stopped before.
func (m *Monitor) Start(ctx context.Context, index int, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.state {
	case stateRunning:
		return errors.New("gpu: monitor already started")
	case stateStopped:
		return errors.New("gpu: monitor already stopped")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.lib == nil {
		return errors.New("gpu: monitor has no NVML library")
	}
	if ret := m.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("gpu: cannot monitor GPU %d: %w", index, &NVMLError{Op: "Init", Ret: ret})
	}
	d, ret := m.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		m.lib.Shutdown()
		return fmt.Errorf("gpu: cannot monitor GPU %d: %w", index, &NVMLError{Op: "DeviceGetHandleByIndex", Ret: ret})
	}
	m.dev = d
	m.errSeen = map[string]bool{}
	m.rep = Report{Monitored: true, Device: index, Start: time.Now(), Interval: interval}
	if v, ret := d.GetName(); ret == nvml.SUCCESS {
		m.rep.Name = v
	}
	if v, ret := d.GetUUID(); ret == nvml.SUCCESS {
		m.rep.UUID = v
	}
	m.probe()
	m.baseline()
	m.sampleLocked(m.rep.Start)

	ctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	m.done = make(chan struct{})
	m.state = stateRunning
	go m.loop(ctx, interval)
	return nil
}

// Stop ends sampling, takes a last sample, releases NVML and returns the
// report. Later calls return the same report; without a successful Start
// the report is empty (Monitored false).
func (m *Monitor) Stop() Report {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		st := m.state
		m.state = stateStopped
		m.mu.Unlock()
		if st != stateRunning {
			return
		}
		m.cancel()
		<-m.done

		m.mu.Lock()
		defer m.mu.Unlock()
		end := time.Now()
		m.sampleLocked(end)
		if m.energyOK && !m.skip[fEnergy] {
			if e, ret := m.dev.GetTotalEnergyConsumption(); ret == nvml.SUCCESS && e >= m.energyStart {
				m.rep.EnergyJ = float64(e-m.energyStart) / 1000
			}
		}
		if m.events != nil {
			m.events.Free()
			m.events = nil
		}
		m.lib.Shutdown()
		m.rep.End = end
		m.final = m.finish()
		if m.opts.OnStop != nil {
			m.opts.OnStop(m.rep.Device)
		}
	})
	return m.final
}

func (m *Monitor) loop(ctx context.Context, interval time.Duration) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.mu.Lock()
			m.sampleLocked(now)
			m.mu.Unlock()
		}
	}
}

// probe decides which readings to take: functions newer than old drivers,
// or deprecated in NVML 13, are looked up first.

// finish computes the derived figures of the report.
func (m *Monitor) finish() Report {
	r := m.rep
	r.Throttled = r.ThrottledSamples > 0
	r.ThrottleReasons = ReasonNames(m.throttleAll)
	if r.SMClockMaxMHz > 0 && r.BusySamples >= 2 {
		r.ClockVariation = float64(r.SMClockMaxMHz-r.SMClockMinMHz) / float64(r.SMClockMaxMHz)
		r.ClockUnstable = r.ClockVariation > m.opts.ClockTolerance
	}
	if m.powerN > 0 {
		r.MeanPowerW = m.powerSum / float64(m.powerN)
	}
	return r
}
