package gpu

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	cpu := Fingerprint{Kind: KindCPU, CPU: CPU{Model: "AMD EPYC 7763 64-Core Processor"}}
	tests := []struct {
		name     string
		fp       Fingerprint
		override []string
		want     []string
	}{
		{"gpu default", h100FP(), nil, []string{"gpu.h100"}},
		{"cpu default", cpu, nil, []string{"cpu"}},
		{"override", h100FP(), []string{"gpu.h100", " gpu.hopper ", "", "gpu.h100"}, []string{"gpu.h100", "gpu.hopper"}},
		{"blank override", h100FP(), []string{" ", ""}, []string{"gpu.h100"}},
		{"class override", func() Fingerprint { f := h100FP(); f.TargetClass = "gpu.h100-sxm"; return f }(), nil, []string{"gpu.h100-sxm"}},
	}
	for _, tc := range tests {
		if got := Queues(tc.fp, tc.override); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Queues = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckPlatform(t *testing.T) {
	t.Parallel()
	fp := h100FP()
	cpu := Fingerprint{Kind: KindCPU, CPU: CPU{Model: "AMD EPYC 7763 64-Core Processor"}, ORTVersion: "1.24.1"}
	tests := []struct {
		name string
		task string
		fp   Fingerprint
		ok   bool
	}{
		{"unpinned", "", fp, true},
		{"same key", fp.PlatformKey(), fp, true},
		{"same class", "gpu.h100", fp, true},
		{"other trt build", "gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.27-drv550", fp, false},
		{"other gpu", "gpu-nvidia-a100-sxm4-40gb-sm80-trt10.3.0.26-drv550", fp, false},
		{"other class", "gpu.a100", fp, false},
		{"cpu task on gpu worker", "cpu", fp, false},
		{"cpu key", cpu.PlatformKey(), cpu, true},
		{"cpu class", "cpu", cpu, true},
		{"gpu task on cpu worker", "gpu.h100", cpu, false},
		{"other ort", "cpu-amd-epyc-7763-64-core-ort1.22.0", cpu, false},
	}
	for _, tc := range tests {
		err := CheckPlatform(tc.task, tc.fp)
		if (err == nil) != tc.ok {
			t.Errorf("%s: CheckPlatform(%q) = %v, want ok=%v", tc.name, tc.task, err, tc.ok)
			continue
		}
		if err != nil {
			var pe *PlatformError
			if !errors.Is(err, ErrWrongPlatform) || !errors.As(err, &pe) || pe.Task != tc.task {
				t.Errorf("%s: error %v does not wrap ErrWrongPlatform with the task", tc.name, err)
			}
			if !strings.Contains(err.Error(), tc.task) || !strings.Contains(err.Error(), tc.fp.Class()) {
				t.Errorf("%s: message %q should name the task platform and the worker class", tc.name, err)
			}
		}
	}

	// A heterogeneous worker accepts the key of any of its GPUs.
	mixed := h100FP()
	mixed.GPUs = append(mixed.GPUs, GPU{Index: 1, Name: "NVIDIA L4", UUID: "GPU-l4", ComputeCapability: "8.9"})
	if err := CheckPlatform(mixed.DeviceKey(1), mixed); err != nil {
		t.Errorf("mixed worker refuses its L4 key: %v", err)
	}
}

func TestVisibleDevices(t *testing.T) {
	t.Parallel()
	fp := h100FP()
	fp.GPUs = append(fp.GPUs, GPU{Index: 1, Name: "NVIDIA H100 80GB HBM3", ComputeCapability: "9.0"})
	tests := []struct {
		name string
		fp   Fingerprint
		i    int
		want []string
	}{
		{"by uuid", fp, 0, []string{"CUDA_VISIBLE_DEVICES=GPU-0c4f3a2e-1111-2222-3333-444455556666"}},
		{"by index without uuid", fp, 1, []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"}},
		{"out of range hides all", fp, 2, []string{"CUDA_VISIBLE_DEVICES="}},
		{"negative hides all", fp, -1, []string{"CUDA_VISIBLE_DEVICES="}},
		{"cpu hides all", Fingerprint{Kind: KindCPU}, 0, []string{"CUDA_VISIBLE_DEVICES="}},
	}
	for _, tc := range tests {
		if got := tc.fp.VisibleDevices(tc.i); !slices.Equal(got, tc.want) {
			t.Errorf("%s: VisibleDevices(%d) = %q, want %q", tc.name, tc.i, got, tc.want)
		}
	}
}
