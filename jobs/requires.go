package jobs

import (
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/state"
)

// engineRequires is what a machine needs to run a winner's engine (nil:
// any machine of the platform's kind), from what its backend reported
// (info) and the platform key it was built on. An ONNX Runtime engine is
// tied to the CPU when its optimized model holds layout operators
// (ort.InfoHardwareOps, with the NCHWc block of the CPU that built it); a
// TensorRT plan always is, to its GPU's compute capability and TensorRT
// version.
func engineRequires(candidate string, info map[string]string, platform string) *state.Requires {
	switch {
	case strings.HasPrefix(candidate, "ort:"):
		ops := info[ort.InfoHardwareOps]
		if ops == "" {
			return nil
		}
		block, _ := strconv.Atoi(info[ort.InfoNCHWcBlock])
		return state.NCHWcRequires(strings.Split(ops, ","), info["goarch"], block)
	case strings.HasPrefix(candidate, "trt:"):
		r := &state.Requires{}
		for _, key := range []string{platform, info["platform"]} {
			if p, err := gpu.ParseKey(key); err == nil && p.Kind == gpu.KindGPU {
				r.ComputeCapability, r.TensorRT = p.ComputeCapability, p.TensorRT
				break
			}
		}
		if v := info["trt_version"]; v != "" {
			r.TensorRT = majorMinorPatch(v)
		}
		if r.ComputeCapability == "" && r.TensorRT == "" {
			return nil
		}
		return r
	}
	return nil
}

// majorMinorPatch cuts a version to its first three parts ("10.3.0.26" →
// "10.3.0"): a plan runs with the TensorRT release that built it, whatever
// the build number.
func majorMinorPatch(v string) string {
	parts := strings.SplitN(v, ".", 4)
	return strings.Join(parts[:min(3, len(parts))], ".")
}
