package gpu

import (
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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
// sampleLocked takes one sample: reads it, polls Xid events, hands it to
// OnSample and adds it to the report.
func (m *Monitor) sampleLocked(now time.Time) {
	s, reasonsKnown, utilKnown := m.readSample(now)
	m.pollXids(now)
	if m.opts.OnSample != nil {
		m.opts.OnSample(m.rep.Device, s)
	}
	m.record(s, reasonsKnown, utilKnown)
}

// record adds a sample to the report's samples and aggregates.
func (m *Monitor) record(s Sample, reasonsKnown, utilKnown bool) {
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

// readSample reads every field the GPU gives; reasonsKnown and utilKnown
// say whether the two fields that tell busy from idle were read.
func (m *Monitor) readSample(now time.Time) (s Sample, reasonsKnown, utilKnown bool) {
	s.Time = now
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
	return s, reasonsKnown, utilKnown
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

func sub0(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
