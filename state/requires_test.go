package state_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/state"
)

// CanRun refuses exactly the machines an engine does not run on: an NCHWc
// model padded to 16 needs AVX-512F, one padded to 8 a CPU without it (ONNX
// Runtime would use 16 there), a TensorRT plan its compute capability and
// release; a nil requirement runs anywhere.
func TestRequiresCanRun(t *testing.T) {
	t.Parallel()
	avx512 := state.Machine{Name: "avx512 box", Arch: "amd64", Flags: []string{"avx", "avx2", "avx512f", "sse4_2"}}
	avx2 := state.Machine{Name: "avx2 box", Arch: "amd64", Flags: []string{"avx", "avx2", "sse4_2"}}
	arm := state.Machine{Name: "arm box", Arch: "arm64", Flags: []string{"neon"}}
	h100 := state.Machine{Name: "h100", Arch: "amd64", ComputeCapability: "9.0", TensorRT: "10.3.0"}
	nchwc16 := state.NCHWcRequires([]string{state.NCHWcDomain}, "amd64", 16)
	nchwc8 := state.NCHWcRequires([]string{state.NCHWcDomain}, "amd64", 8)
	plan := &state.Requires{ComputeCapability: "9.0", TensorRT: "10.3.0"}
	for _, tc := range []struct {
		name string
		r    *state.Requires
		m    state.Machine
		says string // "" runs
	}{
		{"portable engine anywhere", nil, avx2, ""},
		{"block 16 on AVX-512", nchwc16, avx512, ""},
		{"block 16 on AVX2", nchwc16, avx2, "padded to blocks of 16 channels (needs avx512f), but ONNX Runtime uses blocks of 8 on avx2 box (avx avx2 sse4_2)"},
		{"block 16 on arm64", nchwc16, arm, "it was optimized on amd64, arm box is arm64"},
		{"block 8 on AVX2", nchwc8, avx2, ""},
		{"block 8 on AVX-512", nchwc8, avx512, "blocks of 8 channels (needs a CPU without avx512f), but ONNX Runtime uses blocks of 16"},
		{"plan on its GPU", plan, h100, ""},
		{"plan on an A100", plan, state.Machine{Name: "a100", ComputeCapability: "8.0", TensorRT: "10.3.0"}, "built for compute capability 9.0, a100 has 8.0"},
		{"plan with another TensorRT", plan, state.Machine{Name: "h100 trt 10.8", ComputeCapability: "9.0", TensorRT: "10.8.0"}, "built by TensorRT 10.3.0, h100 trt 10.8 has 10.8.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.CanRun(tc.m)
			switch {
			case tc.says == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("CanRun = %v, want it to say %q", err, tc.says)
			}
		})
	}
}
