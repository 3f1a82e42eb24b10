package gpu

import (
	"fmt"
	"math/bits"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Clock event ("throttle") reason bits as NVML reports them from
// nvmlDeviceGetCurrentClocksEventReasons (NVML 12.2+) or the deprecated
// nvmlDeviceGetCurrentClocksThrottleReasons; both return the same bits.
const (
	ReasonGPUIdle             uint64 = nvml.ClocksEventReasonGpuIdle
	ReasonAppClocksSetting    uint64 = nvml.ClocksEventReasonApplicationsClocksSetting
	ReasonSWPowerCap          uint64 = nvml.ClocksEventReasonSwPowerCap
	ReasonHWSlowdown          uint64 = nvml.ClocksThrottleReasonHwSlowdown
	ReasonSyncBoost           uint64 = nvml.ClocksEventReasonSyncBoost
	ReasonSWThermal           uint64 = nvml.ClocksEventReasonSwThermalSlowdown
	ReasonHWThermal           uint64 = nvml.ClocksThrottleReasonHwThermalSlowdown
	ReasonHWPowerBrake        uint64 = nvml.ClocksThrottleReasonHwPowerBrakeSlowdown
	ReasonDisplayClockSetting uint64 = nvml.ClocksEventReasonDisplayClockSetting
	ReasonBoardLimit          uint64 = nvml.ClocksEventReasonBoardLimit
	ReasonReliability         uint64 = nvml.ClocksEventReasonReliability
)

// reasonNames in bit order.
var reasonNames = []struct {
	bit  uint64
	name string
}{
	{ReasonGPUIdle, "gpu_idle"},
	{ReasonAppClocksSetting, "app_clocks_setting"},
	{ReasonSWPowerCap, "sw_power_cap"},
	{ReasonHWSlowdown, "hw_slowdown"},
	{ReasonSyncBoost, "sync_boost"},
	{ReasonSWThermal, "sw_thermal"},
	{ReasonHWThermal, "hw_thermal"},
	{ReasonHWPowerBrake, "hw_power_brake"},
	{ReasonDisplayClockSetting, "display_clock_setting"},
	{ReasonBoardLimit, "board_limit"},
	{ReasonReliability, "reliability"},
}

// KnownReasons names every reason bit this package knows, in bit order.
func KnownReasons() []string {
	out := make([]string, len(reasonNames))
	for i, r := range reasonNames {
		out[i] = r.name
	}
	return out
}

// NotThrottling are the reasons that do not make a measurement suspect: the
// GPU was idle (between runs), or the clocks are where the application
// clocks setting put them. Every other reason, known or not, means the
// clocks were held below what the benchmark asked for.
const NotThrottling = ReasonGPUIdle | ReasonAppClocksSetting

// ReasonNames decodes a reason bit mask into names in bit order, e.g.
// 0x24 → ["sw_power_cap", "sw_thermal"]. Unknown bits are named
// "reason_0x800".
func ReasonNames(mask uint64) []string {
	var out []string
	known := uint64(0)
	for _, r := range reasonNames {
		known |= r.bit
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	for rest := mask &^ known; rest != 0; rest &= rest - 1 {
		out = append(out, fmt.Sprintf("reason_0x%x", uint64(1)<<bits.TrailingZeros64(rest)))
	}
	return out
}

// Throttling is the part of a reason mask that makes a measurement suspect.
func Throttling(mask uint64) uint64 { return mask &^ NotThrottling }
