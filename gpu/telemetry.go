package gpu

import (
	"fmt"
	"time"
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
