package gpu_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/tunefleet/tunefleet/gpu"
)

// A worker detects its platform once at start (here on go-nvml's fake DGX
// H100; a real worker calls gpu.DetectDefault) and serves its class's queue.
func ExampleDetect() {
	fp, err := gpu.Detect(context.Background(), dgxh100.New(), gpu.DetectOptions{
		TensorRTVersion: "10.3.0", TensorRTBuild: "26", ORTVersion: "1.24.1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(fp.Kind, len(fp.GPUs), fp.GPUs[0].Name, fp.GPUs[0].ComputeCapability, fp.CUDADriverVersion)
	fmt.Println(gpu.Queues(fp, nil))
	// Output:
	// gpu 8 NVIDIA H100 80GB HBM3 9.0 12.4
	// [gpu.h100]
}

func ExampleFingerprint_PlatformKey() {
	fp := gpu.Fingerprint{
		Kind: gpu.KindGPU, OS: "linux", Arch: "amd64",
		GPUs:            []gpu.GPU{{Name: "NVIDIA H100 80GB HBM3", ComputeCapability: "9.0", UUID: "GPU-5a1b"}},
		DriverVersion:   "550.54.15",
		TensorRTVersion: "10.3.0", TensorRTBuild: "26",
	}
	fmt.Println(fp.PlatformKey())
	fmt.Println(fp.Class())
	fmt.Println(fp.VisibleDevices(0))
	// Output:
	// gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550
	// gpu.h100
	// [CUDA_VISIBLE_DEVICES=GPU-5a1b]
}

func ExampleCheckPlatform() {
	fp := gpu.Fingerprint{
		Kind: gpu.KindGPU, OS: "linux", Arch: "amd64",
		GPUs:            []gpu.GPU{{Name: "NVIDIA H100 80GB HBM3", ComputeCapability: "9.0"}},
		DriverVersion:   "550.54.15",
		TensorRTVersion: "10.3.0", TensorRTBuild: "26",
	}
	err := gpu.CheckPlatform("gpu-nvidia-h100-80gb-hbm3-sm90-trt10.4.0.11-drv550", fp)
	fmt.Println(errors.Is(err, gpu.ErrWrongPlatform))
	fmt.Println(gpu.CheckPlatform("gpu.h100", fp))
	// Output:
	// true
	// <nil>
}
