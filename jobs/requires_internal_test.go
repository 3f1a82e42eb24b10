package jobs

import (
	"reflect"
	"testing"

	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/state"
)

// What finalize records a winner requires: an ONNX Runtime engine with
// NCHWc operators its block, ISA and architecture (none without them); a
// TensorRT plan its compute capability (the platform key's) and TensorRT
// release (trtexec's, without the build).
func TestEngineRequires(t *testing.T) {
	t.Parallel()
	h100 := "gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550"
	for _, tc := range []struct {
		name, candidate, platform string
		info                      map[string]string
		want                      *state.Requires
	}{
		{"ort all with NCHWc on AVX-512", "ort:cpu:all", "cpu-amd-epyc-avx512-ort1.24.1",
			map[string]string{ort.InfoHardwareOps: state.NCHWcDomain, ort.InfoNCHWcBlock: "16", "goarch": "amd64"},
			&state.Requires{Operators: []string{state.NCHWcDomain}, NCHWcBlock: 16, ISA: []string{"avx512f"}, Arch: "amd64"}},
		{"ort all with NCHWc on AVX2", "ort:cpu:all", "cpu-intel-xeon-avx2-ort1.24.1",
			map[string]string{ort.InfoHardwareOps: state.NCHWcDomain, ort.InfoNCHWcBlock: "8", "goarch": "amd64"},
			&state.Requires{Operators: []string{state.NCHWcDomain}, NCHWcBlock: 8, ISAAbsent: []string{"avx512f"}, Arch: "amd64"}},
		{"ort all without layout operators", "ort:cpu:all", "cpu-amd-epyc-avx512-ort1.24.1", map[string]string{"goarch": "amd64"}, nil},
		{"ort extended", "ort:cpu:extended", "cpu-amd-epyc-avx512-ort1.24.1", nil, nil},
		{"trt plan", "trt:fp16", h100, map[string]string{"trt_version": "10.3.0.26"},
			&state.Requires{ComputeCapability: "9.0", TensorRT: "10.3.0"}},
		{"trt plan on a run bound to a class", "trt:fp16", "gpu.h100", map[string]string{"trt_version": "10.3.0.26", "platform": h100},
			&state.Requires{ComputeCapability: "9.0", TensorRT: "10.3.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineRequires(tc.candidate, tc.info, tc.platform); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("engineRequires = %+v, want %+v", got, tc.want)
			}
		})
	}
}
