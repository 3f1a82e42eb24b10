package gpu

import (
	"reflect"
	"strings"
	"testing"
)

// ParseKey reads back what PlatformKey wrote: the ISA tier (and the flags
// it implies) of a CPU key, the compute capability and TensorRT version
// of a GPU key, and the OS and architecture of a key that names them.
func TestParseKey(t *testing.T) {
	t.Parallel()
	cpuFP := func(model string, flags []string, goarch string) Fingerprint {
		return Fingerprint{Kind: KindCPU, OS: "linux", Arch: goarch, CPU: CPU{Model: model, Flags: flags}, ORTVersion: "1.24.1"}
	}
	a100 := h100FP()
	a100.GPUs[0].Name, a100.GPUs[0].ComputeCapability = "NVIDIA A100-SXM4-80GB", "8.0"
	b200 := h100FP()
	b200.GPUs[0].Name, b200.GPUs[0].ComputeCapability = "NVIDIA B200", "10.0"
	for _, tc := range []struct {
		name string
		key  string
		want KeyParts
	}{
		{"AVX-512 EPYC", cpuFP("AMD EPYC 9654 96-Core Processor", []string{"avx2", "avx512f"}, "amd64").PlatformKey(),
			KeyParts{Kind: KindCPU, ISATier: "avx512", Flags: FlagsOfTier("avx512"), OS: "linux", Arch: "amd64"}},
		{"AVX2 Xeon", cpuFP("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", []string{"avx2"}, "amd64").PlatformKey(),
			KeyParts{Kind: KindCPU, ISATier: "avx2", Flags: FlagsOfTier("avx2"), OS: "linux", Arch: "amd64"}},
		{"Neoverse on arm64", cpuFP("ARM Neoverse-V2", []string{"neon", "sve2"}, "arm64").PlatformKey(),
			KeyParts{Kind: KindCPU, ISATier: "sve2", Flags: FlagsOfTier("sve2"), OS: "linux", Arch: "arm64"}},
		{"no tier", cpuFP("Some CPU", nil, "amd64").PlatformKey(), KeyParts{Kind: KindCPU, OS: "linux", Arch: "amd64"}},
		{"H100", h100FP().PlatformKey(), KeyParts{Kind: KindGPU, ComputeCapability: "9.0", TensorRT: "10.3.0", OS: "linux", Arch: "amd64"}},
		{"A100", a100.PlatformKey(), KeyParts{Kind: KindGPU, ComputeCapability: "8.0", TensorRT: "10.3.0", OS: "linux", Arch: "amd64"}},
		{"B200", b200.PlatformKey(), KeyParts{Kind: KindGPU, ComputeCapability: "10.0", TensorRT: "10.3.0", OS: "linux", Arch: "amd64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseKey(%q) = %+v, want %+v", tc.key, got, tc.want)
			}
		})
	}
	for _, bad := range []struct{ key, says string }{
		{"cpu", "not a platform key"},
		{"gpu.h100", "not a platform key"},
		{"cpu-amd-epyc-avx512", "no ONNX Runtime version"},
		{"gpu-nvidia-h100-trt10.3.0-drv550", "no compute capability"},
	} {
		if _, err := ParseKey(bad.key); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("ParseKey(%q) = %v, want an error saying %q", bad.key, err, bad.says)
		}
	}
}
