package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DefaultInterval is the sampling interval when Start is given none.
const DefaultInterval = 250 * time.Millisecond

// Verdict is what to do with a measurement given the telemetry around it.
type Verdict string

// Verdicts, from best to worst.
const (
	// VerdictOK: nothing suspect was seen (or nothing could be watched,
	// see Report.Monitored).
	VerdictOK Verdict = "ok"
	// VerdictRerun: the GPU throttled or its clocks moved; the numbers are
	// not comparable, measure again.
	VerdictRerun Verdict = "rerun"
	// VerdictReject: the GPU reported errors (uncorrectable ECC, Xid, lost
	// GPU); neither the numbers nor the outputs can be trusted.
	VerdictReject Verdict = "reject"
)

// Sample is one reading of a GPU. Values that the GPU or driver cannot give
// are 0 and named in Report.Unsupported.
type Sample struct {
	Time        time.Time `json:"time"`
	SMClockMHz  uint32    `json:"sm_clock_mhz"`
	MemClockMHz uint32    `json:"mem_clock_mhz"`
	// Reasons is the raw clock event reason mask, ReasonNames its names.
	Reasons     uint64   `json:"reasons"`
	ReasonNames []string `json:"reason_names,omitempty"`
	// Throttled is set when Reasons holds a reason other than idle or the
	// applications clocks setting.
	Throttled      bool   `json:"throttled,omitempty"`
	TemperatureC   uint32 `json:"temperature_c"`
	PowerMW        uint32 `json:"power_mw"`
	GPUUtilPercent uint32 `json:"gpu_util_pct"`
	// ECCCorrected and ECCUncorrected are NVML's volatile totals (since the
	// driver loaded); Report has the increase over the measurement.
	ECCCorrected   uint64 `json:"ecc_corrected"`
	ECCUncorrected uint64 `json:"ecc_uncorrected"`
}

// XidEvent is a critical Xid error NVML reported during the measurement.
type XidEvent struct {
	Time time.Time `json:"time"`
	Xid  uint64    `json:"xid"`
	// Ignored is set for Xids listed in MonitorOptions.IgnoreXids.
	Ignored bool `json:"ignored,omitempty"`
}

// Report summarises the telemetry of one measurement.
type Report struct {
	// Monitored is false when nothing was watched (Stop without a
	// successful Start); the verdict is then ok by default.
	Monitored bool          `json:"monitored"`
	Device    int           `json:"device"`
	UUID      string        `json:"uuid,omitempty"`
	Name      string        `json:"name,omitempty"`
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	Interval  time.Duration `json:"interval_ns"`

	// SampleCount counts every sample; Samples keeps the first
	// MonitorOptions.MaxSamples of them.
	SampleCount      int      `json:"sample_count"`
	Samples          []Sample `json:"samples,omitempty"`
	SamplesTruncated bool     `json:"samples_truncated,omitempty"`
	// BusySamples are those taken while the GPU was not idle; clock and
	// power figures are computed over them.
	BusySamples int `json:"busy_samples"`

	Throttled        bool     `json:"throttled"`
	ThrottledSamples int      `json:"throttled_samples,omitempty"`
	ThrottleReasons  []string `json:"throttle_reasons,omitempty"`

	SMClockMinMHz uint32 `json:"sm_clock_min_mhz,omitempty"`
	SMClockMaxMHz uint32 `json:"sm_clock_max_mhz,omitempty"`
	// ClockVariation is (max-min)/max of the busy SM clock; ClockUnstable
	// is set when it exceeds MonitorOptions.ClockTolerance.
	ClockVariation float64 `json:"clock_variation"`
	ClockUnstable  bool    `json:"clock_unstable,omitempty"`

	MaxTemperatureC uint32  `json:"max_temperature_c,omitempty"`
	MaxPowerW       float64 `json:"max_power_w,omitempty"`
	MeanPowerW      float64 `json:"mean_power_w,omitempty"`
	EnergyJ         float64 `json:"energy_j,omitempty"`

	// New ECC errors during the measurement (volatile counters).
	ECCCorrectedNew   uint64     `json:"ecc_corrected_new,omitempty"`
	ECCUncorrectedNew uint64     `json:"ecc_uncorrected_new,omitempty"`
	Xids              []XidEvent `json:"xids,omitempty"`
	GPULost           bool       `json:"gpu_lost,omitempty"`

	// Unsupported names the readings this GPU or driver could not give
	// (a missing symbol or ERROR_NOT_SUPPORTED); Errors are other failed
	// readings.
	Unsupported []string `json:"unsupported,omitempty"`
	Errors      []string `json:"errors,omitempty"`
}

// Verdict says what to do with the measurement: reject it when the GPU
// reported new uncorrectable ECC errors, an Xid that is not ignored, or was
// lost; re-run it when the GPU throttled or its clocks varied more than the
// tolerance; else keep it.
func (r Report) Verdict() Verdict {
	if !r.Monitored {
		return VerdictOK
	}
	if r.GPULost || r.ECCUncorrectedNew > 0 || r.countedXids() > 0 {
		return VerdictReject
	}
	if r.Throttled || r.ClockUnstable {
		return VerdictRerun
	}
	return VerdictOK
}

// Problems explains the verdict in short sentences, worst first; empty
// when the verdict is ok.
func (r Report) Problems() []string {
	var out []string
	if !r.Monitored {
		return nil
	}
	if r.GPULost {
		out = append(out, "GPU was lost (ERROR_GPU_IS_LOST)")
	}
	if r.ECCUncorrectedNew > 0 {
		out = append(out, fmt.Sprintf("%d new uncorrectable ECC errors", r.ECCUncorrectedNew))
	}
	for _, x := range r.Xids {
		if !x.Ignored {
			out = append(out, fmt.Sprintf("Xid %d at %s", x.Xid, x.Time.Format(time.RFC3339Nano)))
		}
	}
	if r.Throttled {
		out = append(out, fmt.Sprintf("clocks throttled in %d of %d samples (%v)",
			r.ThrottledSamples, r.SampleCount, r.ThrottleReasons))
	}
	if r.ClockUnstable {
		out = append(out, fmt.Sprintf("SM clock varied %.1f%% (%d-%d MHz)",
			100*r.ClockVariation, r.SMClockMinMHz, r.SMClockMaxMHz))
	}
	return out
}

func (r Report) countedXids() int {
	n := 0
	for _, x := range r.Xids {
		if !x.Ignored {
			n++
		}
	}
	return n
}

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

type field int

const (
	fSMClock field = iota
	fMemClock
	fReasons
	fTemperature
	fPower
	fUtilization
	fECC
	fEnergy
	fXid
	nFields
)

var fieldNames = [nFields]string{
	"sm_clock", "mem_clock", "clock_event_reasons", "temperature", "power",
	"utilization", "ecc", "energy", "xid_events",
}

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
func (m *Monitor) probe() {
	has := func(name string) bool { return hasSymbol(m.lib, name) }
	switch {
	case has(symClocksEvent):
		m.reasons = m.dev.GetCurrentClocksEventReasons
	case has(symClocksThrottle):
		m.reasons = m.dev.GetCurrentClocksThrottleReasons
	default:
		m.unsupported(fReasons)
	}
	if !has(symTemperature) {
		m.unsupported(fTemperature)
	}
	if !has(symUtilization) {
		m.unsupported(fUtilization)
	}
	if !has(symEccTotal) {
		m.unsupported(fECC)
	}
	if !has(symEnergy) {
		m.unsupported(fEnergy)
	}
	if !has(symEventSetCreate) || !has(symSupportedEvents) {
		m.unsupported(fXid)
	}
}

// baseline reads the counters the report gives increases of, and
// registers for Xid events.
func (m *Monitor) baseline() {
	if !m.skip[fECC] {
		c, u, ok := m.readECC()
		m.eccBase, m.eccBaseOK = [2]uint64{c, u}, ok
	}
	if !m.skip[fEnergy] {
		e, ret := m.dev.GetTotalEnergyConsumption()
		if m.check(fEnergy, "GetTotalEnergyConsumption", ret) {
			m.energyStart, m.energyOK = e, true
		}
	}
	if m.skip[fXid] {
		return
	}
	types, ret := m.dev.GetSupportedEventTypes()
	if !m.check(fXid, "GetSupportedEventTypes", ret) {
		return
	}
	if types&nvml.EventTypeXidCriticalError == 0 {
		m.unsupported(fXid)
		return
	}
	set, ret := m.lib.EventSetCreate()
	if !m.check(fXid, "EventSetCreate", ret) {
		return
	}
	if ret := m.dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); !m.check(fXid, "RegisterEvents", ret) {
		set.Free()
		return
	}
	m.events = set
}

func (m *Monitor) readECC() (corrected, uncorrected uint64, ok bool) {
	c, ret := m.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	if !m.check(fECC, "GetTotalEccErrors(corrected)", ret) {
		return 0, 0, false
	}
	u, ret := m.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if !m.check(fECC, "GetTotalEccErrors(uncorrected)", ret) {
		return 0, 0, false
	}
	return c, u, true
}

// sampleLocked takes one sample and folds it into the report.
func (m *Monitor) sampleLocked(now time.Time) {
	s := Sample{Time: now}
	if !m.skip[fSMClock] {
		v, ret := m.dev.GetClockInfo(nvml.CLOCK_SM)
		if m.check(fSMClock, "GetClockInfo(SM)", ret) {
			s.SMClockMHz = v
		}
	}
	if !m.skip[fMemClock] {
		v, ret := m.dev.GetClockInfo(nvml.CLOCK_MEM)
		if m.check(fMemClock, "GetClockInfo(MEM)", ret) {
			s.MemClockMHz = v
		}
	}
	reasonsKnown := false
	if !m.skip[fReasons] && m.reasons != nil {
		v, ret := m.reasons()
		if m.check(fReasons, "GetCurrentClocksEventReasons", ret) {
			reasonsKnown = true
			s.Reasons = v
			s.ReasonNames = ReasonNames(v)
			s.Throttled = Throttling(v) != 0
		}
	}
	if !m.skip[fTemperature] {
		v, ret := m.dev.GetTemperature(nvml.TEMPERATURE_GPU)
		if m.check(fTemperature, "GetTemperature", ret) {
			s.TemperatureC = v
		}
	}
	if !m.skip[fPower] {
		v, ret := m.dev.GetPowerUsage()
		if m.check(fPower, "GetPowerUsage", ret) {
			s.PowerMW = v
		}
	}
	utilKnown := false
	if !m.skip[fUtilization] {
		v, ret := m.dev.GetUtilizationRates()
		if m.check(fUtilization, "GetUtilizationRates", ret) {
			s.GPUUtilPercent = v.Gpu
			utilKnown = true
		}
	}
	if !m.skip[fECC] {
		if c, u, ok := m.readECC(); ok {
			s.ECCCorrected, s.ECCUncorrected = c, u
			if m.eccBaseOK {
				m.rep.ECCCorrectedNew = max(m.rep.ECCCorrectedNew, sub0(c, m.eccBase[0]))
				m.rep.ECCUncorrectedNew = max(m.rep.ECCUncorrectedNew, sub0(u, m.eccBase[1]))
			}
		}
	}
	m.pollXids(now)
	if m.opts.OnSample != nil {
		m.opts.OnSample(m.rep.Device, s)
	}

	r := &m.rep
	r.SampleCount++
	if len(r.Samples) < m.opts.MaxSamples {
		r.Samples = append(r.Samples, s)
	} else {
		r.SamplesTruncated = true
	}
	if s.TemperatureC > r.MaxTemperatureC {
		r.MaxTemperatureC = s.TemperatureC
	}
	if s.Throttled {
		r.ThrottledSamples++
		m.throttleAll |= Throttling(s.Reasons)
	}
	// Busy: not idle by the reasons mask; without reasons, by utilization;
	// without either, every sample.
	busy := true
	switch {
	case reasonsKnown:
		busy = s.Reasons&ReasonGPUIdle == 0
	case utilKnown:
		busy = s.GPUUtilPercent > 0
	}
	if !busy {
		return
	}
	r.BusySamples++
	if s.SMClockMHz > 0 {
		if r.SMClockMinMHz == 0 || s.SMClockMHz < r.SMClockMinMHz {
			r.SMClockMinMHz = s.SMClockMHz
		}
		if s.SMClockMHz > r.SMClockMaxMHz {
			r.SMClockMaxMHz = s.SMClockMHz
		}
	}
	if s.PowerMW > 0 {
		w := float64(s.PowerMW) / 1000
		r.MaxPowerW = max(r.MaxPowerW, w)
		m.powerSum += w
		m.powerN++
	}
}

func (m *Monitor) pollXids(now time.Time) {
	if m.events == nil {
		return
	}
	for range 64 { // bounded: never spin on a flood of events
		data, ret := m.events.Wait(0)
		if ret == nvml.ERROR_TIMEOUT {
			return
		}
		if !m.check(fXid, "EventSetWait", ret) {
			return
		}
		if data.EventType&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		m.rep.Xids = append(m.rep.Xids, XidEvent{
			Time: now, Xid: data.EventData, Ignored: slices.Contains(m.opts.IgnoreXids, data.EventData),
		})
	}
}

// check records a failed reading and reports whether ret is SUCCESS. A
// reading that is not supported (or not permitted) is not tried again.
func (m *Monitor) check(f field, op string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION:
		m.unsupported(f)
		return false
	case nvml.ERROR_GPU_IS_LOST:
		m.rep.GPULost = true
	}
	msg := op + ": " + retName(ret)
	if !m.errSeen[msg] && len(m.rep.Errors) < 32 {
		m.errSeen[msg] = true
		m.rep.Errors = append(m.rep.Errors, msg)
	}
	return false
}

func (m *Monitor) unsupported(f field) {
	if m.skip[f] {
		return
	}
	m.skip[f] = true
	m.rep.Unsupported = append(m.rep.Unsupported, fieldNames[f])
}

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

func sub0(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
