package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// nvmlCalls counts the calls recorded by a moq mock (go-nvml's mock.Interface,
// mock.Device, or a server embedding them): every method FooCalls() that
// returns a slice, by Foo.
func nvmlCalls(x any) map[string]int {
	out := map[string]int{}
	v := reflect.ValueOf(x)
	for i := 0; i < v.NumMethod(); i++ {
		name := v.Type().Method(i).Name
		mt := v.Method(i).Type()
		if !strings.HasSuffix(name, "Calls") || mt.NumIn() != 0 || mt.NumOut() != 1 || mt.Out(0).Kind() != reflect.Slice {
			continue
		}
		if n := v.Method(i).Call(nil)[0].Len(); n > 0 {
			out[strings.TrimSuffix(name, "Calls")] = n
		}
	}
	return out
}

func detectOpts() DetectOptions {
	return DetectOptions{TensorRTVersion: "10.3.0", TensorRTBuild: "26", ORTVersion: "1.24.1"}
}

func TestDetectDGX(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		srv     *server.Server
		gpuName string
		cc      string
		arch    string
		memGiB  uint64
		key     string
		class   string
		driver  string
		cuda    string
	}{
		{"dgx a100", dgxa100.New(), "Mock NVIDIA A100-SXM4-40GB", "8.0", "ampere", 40,
			"gpu-mock-nvidia-a100-sxm4-40gb-sm80-trt10.3.0.26-drv550", "gpu.a100", "550.54.15", "12.4"},
		{"dgx h100", dgxh100.New(), "NVIDIA H100 80GB HBM3", "9.0", "hopper", 80,
			"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550", "gpu.h100", "550.54.15", "12.4"},
		{"dgx h200", dgxh200.New(), "NVIDIA H200 141GB HBM3e", "9.0", "hopper", 141,
			"gpu-nvidia-h200-141gb-hbm3e-sm90-trt10.3.0.26-drv550", "gpu.h200", "550.54.15", "12.4"},
		{"dgx b200", dgxb200.New(), "NVIDIA B200 180GB HBM3e", "10.0", "blackwell", 180,
			"gpu-nvidia-b200-180gb-hbm3e-sm100-trt10.3.0.26-drv560", "gpu.b200", "560.28.03", "12.6"},
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("expected keys assume linux/amd64")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fp, err := Detect(context.Background(), tc.srv, detectOpts())
			if err != nil {
				t.Fatal(err)
			}
			if fp.Kind != KindGPU || len(fp.GPUs) != 8 {
				t.Fatalf("kind %q with %d GPUs, want gpu with 8", fp.Kind, len(fp.GPUs))
			}
			if fp.DriverVersion != tc.driver || fp.CUDADriverVersion != tc.cuda || fp.NVMLVersion != "12."+tc.driver {
				t.Errorf("versions: driver %q cuda %q nvml %q", fp.DriverVersion, fp.CUDADriverVersion, fp.NVMLVersion)
			}
			uuids := map[string]bool{}
			for i, g := range fp.GPUs {
				if g.Index != i || g.Name != tc.gpuName || g.ComputeCapability != tc.cc || g.Architecture != tc.arch ||
					g.MemoryTotal != tc.memGiB<<30 || g.MIGEnabled {
					t.Errorf("GPU %d = %+v", i, g)
				}
				if !strings.HasPrefix(g.UUID, "GPU-") || uuids[g.UUID] {
					t.Errorf("GPU %d UUID %q missing or repeated", i, g.UUID)
				}
				uuids[g.UUID] = true
				if g.PCIDeviceID == "" {
					t.Errorf("GPU %d: no PCI device id", i)
				}
			}
			if got := fp.PlatformKey(); got != tc.key {
				t.Errorf("PlatformKey() = %q, want %q", got, tc.key)
			}
			if got := fp.Class(); got != tc.class {
				t.Errorf("Class() = %q, want %q", got, tc.class)
			}
			if !fp.Homogeneous() {
				t.Error("8 identical GPUs not homogeneous")
			}
			if vd := fp.VisibleDevices(3); len(vd) != 1 || vd[0] != "CUDA_VISIBLE_DEVICES="+fp.GPUs[3].UUID {
				t.Errorf("VisibleDevices(3) = %q", vd)
			}
			calls := nvmlCalls(tc.srv)
			if calls["Init"] != 1 || calls["Shutdown"] != 1 {
				t.Errorf("Init/Shutdown calls: %v", calls)
			}
			if len(fp.Notes) != 0 {
				t.Errorf("notes on a complete machine: %q", fp.Notes)
			}
		})
	}
}

// TestDetectNoDriver: with no driver Init fails, the fingerprint is the CPU
// one, and nothing but Init was called (a bare mock panics on any other
// call, and its call records are counted).
func TestDetectNoDriver(t *testing.T) {
	t.Parallel()
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		fp, err := Detect(context.Background(), lib, detectOpts())
		if err != nil {
			t.Fatalf("%v: %v", ret, err)
		}
		if fp.Kind != KindCPU || len(fp.GPUs) != 0 || fp.CPU.Usable < 1 {
			t.Errorf("%v: fingerprint %+v", ret, fp)
		}
		if !strings.HasPrefix(fp.PlatformKey(), "cpu-") || !strings.HasSuffix(fp.PlatformKey(), "-ort1.24.1") || fp.Class() != "cpu" {
			t.Errorf("%v: key %q class %q", ret, fp.PlatformKey(), fp.Class())
		}
		if calls := nvmlCalls(lib); !reflect.DeepEqual(calls, map[string]int{"Init": 1}) {
			t.Errorf("%v: NVML calls after a failed Init: %v", ret, calls)
		}
		if len(fp.Notes) == 0 || !strings.Contains(strings.Join(fp.Notes, "\n"), "NVML unavailable") {
			t.Errorf("%v: notes %q do not say why", ret, fp.Notes)
		}
	}
}

func TestDetectInitFailures(t *testing.T) {
	t.Parallel()
	// A driver that is there but refuses us is an error, with the CPU
	// fingerprint for a caller that wants to carry on.
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_NO_PERMISSION }}
	fp, err := Detect(context.Background(), lib, detectOpts())
	var ne *NVMLError
	if !errors.As(err, &ne) || ne.Ret != nvml.ERROR_NO_PERMISSION || ne.Op != "Init" {
		t.Fatalf("err = %v, want NVMLError Init NO_PERMISSION", err)
	}
	if fp.Kind != KindCPU {
		t.Errorf("kind %q", fp.Kind)
	}
	if calls := nvmlCalls(lib); !reflect.DeepEqual(calls, map[string]int{"Init": 1}) {
		t.Errorf("NVML calls after a failed Init: %v", calls)
	}

	// RequireGPU turns every absence into ErrNoGPU.
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_NO_PERMISSION} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		opts := detectOpts()
		opts.RequireGPU = true
		if _, err := Detect(context.Background(), lib, opts); !errors.Is(err, ErrNoGPU) {
			t.Errorf("RequireGPU with %v: err = %v", ret, err)
		}
	}
	opts := detectOpts()
	opts.RequireGPU = true
	if _, err := Detect(context.Background(), nil, opts); !errors.Is(err, ErrNoGPU) {
		t.Errorf("RequireGPU with nil lib: err = %v", err)
	}
	if fp, err := Detect(context.Background(), nil, detectOpts()); err != nil || fp.Kind != KindCPU {
		t.Errorf("nil lib: %v %v", fp.Kind, err)
	}
}

func TestDetectNoGPUs(t *testing.T) {
	t.Parallel()
	srv := dgxh100.NewWithGPUs() // a driver with no GPU
	fp, err := Detect(context.Background(), srv, detectOpts())
	if err != nil || fp.Kind != KindCPU {
		t.Fatalf("kind %q err %v", fp.Kind, err)
	}
	if c := nvmlCalls(srv); c["Shutdown"] != 1 {
		t.Errorf("no Shutdown after a successful Init: %v", c)
	}
	opts := detectOpts()
	opts.RequireGPU = true
	if _, err := Detect(context.Background(), dgxh100.NewWithGPUs(), opts); !errors.Is(err, ErrNoGPU) {
		t.Errorf("RequireGPU, no GPUs: err = %v", err)
	}
}

// TestDetectMissingSymbols: an old driver without nvmlDeviceGetArchitecture,
// nvmlDeviceGetMigMode and nvmlSystemGetCudaDriverVersion; those functions
// are never called and the fingerprint says what is missing.
func TestDetectMissingSymbols(t *testing.T) {
	t.Parallel()
	srv := dgxa100.New()
	missing := map[string]bool{symArchitecture: true, symMigMode: true, symCudaDriver: true}
	srv.LookupSymbolFunc = func(s string) error {
		if missing[s] {
			return fmt.Errorf("undefined symbol: %s", s)
		}
		return nil
	}
	fp, err := Detect(context.Background(), srv, detectOpts())
	if err != nil {
		t.Fatal(err)
	}
	if fp.Kind != KindGPU || len(fp.GPUs) != 8 || fp.GPUs[0].Architecture != "" || fp.CUDADriverVersion != "" {
		t.Errorf("fingerprint %+v", fp)
	}
	if c := nvmlCalls(srv); c["SystemGetCudaDriverVersion"] != 0 {
		t.Errorf("SystemGetCudaDriverVersion called though missing: %v", c)
	}
	for _, d := range srv.Devices {
		c := nvmlCalls(d)
		if c["GetArchitecture"] != 0 || c["GetMigMode"] != 0 {
			t.Errorf("missing functions called: %v", c)
		}
	}
	notes := strings.Join(fp.Notes, "\n")
	for s := range missing {
		if !strings.Contains(notes, s) {
			t.Errorf("notes do not name %s: %q", s, notes)
		}
	}
}

func TestDetectDeviceFailure(t *testing.T) {
	t.Parallel()
	srv := dgxh100.New()
	d := srv.Devices[5].(*server.Device)
	d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	_, err := Detect(context.Background(), srv, detectOpts())
	var ne *NVMLError
	if !errors.As(err, &ne) || ne.Ret != nvml.ERROR_GPU_IS_LOST || !strings.Contains(err.Error(), "GPU 5") {
		t.Fatalf("err = %v", err)
	}
	if c := nvmlCalls(srv); c["Shutdown"] != 1 {
		t.Errorf("no Shutdown after an error: %v", c)
	}
}

func TestDetectMIGAndPCI(t *testing.T) {
	t.Parallel()
	srv := dgxa100.New()
	d := srv.Devices[0].(*server.Device)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	pci := d.GetPciInfoFunc
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p, ret := pci()
		for i, c := range "00000000:07:00.0" {
			p.BusId[i] = int8(c)
		}
		return p, ret
	}
	fp, err := Detect(context.Background(), srv, detectOpts())
	if err != nil {
		t.Fatal(err)
	}
	g := fp.GPUs[0]
	if !g.MIGEnabled || g.PCIBusID != "00000000:07:00.0" || g.PCIDeviceID != "0x20b010de" {
		t.Errorf("GPU 0 = %+v", g)
	}
	if fp.Homogeneous() {
		t.Error("a MIG GPU among full GPUs has the same key")
	}
	if !strings.HasSuffix(fp.DeviceKey(0), "-mig") {
		t.Errorf("DeviceKey(0) = %q", fp.DeviceKey(0))
	}
}

func TestDetectHeterogeneous(t *testing.T) {
	t.Parallel()
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB, gpus.A100_PCIE_80GB)
	fp, err := Detect(context.Background(), srv, detectOpts())
	if err != nil {
		t.Fatal(err)
	}
	if fp.Homogeneous() || len(fp.Keys()) != 2 {
		t.Fatalf("keys %q", fp.Keys())
	}
	a100, _ := fp.ForDevice(1)
	if a100.Class() != "gpu.a100" || !strings.HasPrefix(a100.PlatformKey(), "gpu-nvidia-a100-pcie-80gb-sm80-") {
		t.Errorf("device 1: class %q key %q", a100.Class(), a100.PlatformKey())
	}
}

func TestDetectOptions(t *testing.T) {
	t.Parallel()
	opts := detectOpts()
	opts.Class = "gpu.h100-sxm"
	fp, err := Detect(context.Background(), dgxh100.New(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Class() != "gpu.h100-sxm" || fp.TensorRTVersion != "10.3.0" || fp.TensorRTBuild != "26" || fp.ORTVersion != "1.24.1" {
		t.Errorf("options not carried: %+v", fp)
	}
	if fp.Format != FingerprintFormat || fp.OS != runtime.GOOS || fp.Arch != runtime.GOARCH {
		t.Errorf("format/os/arch: %q %q %q", fp.Format, fp.OS, fp.Arch)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lib := &mock.Interface{}
	if _, err := Detect(ctx, lib, opts); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: err = %v", err)
	}
	if c := nvmlCalls(lib); len(c) != 0 {
		t.Errorf("NVML called with a canceled context: %v", c)
	}
}

func TestFingerprintJSON(t *testing.T) {
	t.Parallel()
	fp, err := Detect(context.Background(), dgxh100.New(), detectOpts())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(NewInfo(fp, nil))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"platform", "class", "queues", "fingerprint"} {
		if _, ok := m[k]; !ok {
			t.Errorf("info JSON lacks %q: %s", k, b)
		}
	}
	f := m["fingerprint"].(map[string]any)
	for _, k := range []string{"format", "kind", "gpus", "driver_version", "cuda_driver_version", "tensorrt_version", "tensorrt_build", "cpu"} {
		if _, ok := f[k]; !ok {
			t.Errorf("fingerprint JSON lacks %q", k)
		}
	}
	g := f["gpus"].([]any)[0].(map[string]any)
	for _, k := range []string{"index", "name", "uuid", "compute_capability", "memory_total_bytes"} {
		if _, ok := g[k]; !ok {
			t.Errorf("gpu JSON lacks %q", k)
		}
	}
}

// TestDetectDefaultHere runs the real go-nvml library: on a machine without
// an NVIDIA driver it must give the CPU fingerprint, cleanly.
func TestDetectDefaultHere(t *testing.T) {
	t.Parallel()
	fp, err := DetectDefault(context.Background(), detectOpts())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this machine: %s (%s)", fp.PlatformKey(), fp.Kind)
	if fp.Kind == KindGPU {
		t.Skip("this machine has an NVIDIA GPU")
	}
	if fp.Kind != KindCPU || fp.Class() != "cpu" || !strings.HasPrefix(fp.PlatformKey(), "cpu-") {
		t.Errorf("fingerprint %+v", fp)
	}
	// Twice in a row: the failed dlopen leaves nothing behind.
	if fp2, err := DetectDefault(context.Background(), detectOpts()); err != nil || fp2.PlatformKey() != fp.PlatformKey() {
		t.Errorf("second DetectDefault: %v %q", err, fp2.PlatformKey())
	}
}

func TestCUDAVersion(t *testing.T) {
	t.Parallel()
	for v, want := range map[int]string{12040: "12.4", 11080: "11.8", 13000: "13.0", 12090: "12.9", 10020: "10.2"} {
		if got := cudaVersion(v); got != want {
			t.Errorf("cudaVersion(%d) = %q, want %q", v, got, want)
		}
	}
}

// CPUOnly describes the CPU of a machine with GPUs, without asking NVML.
func TestDetectCPUOnly(t *testing.T) {
	t.Parallel()
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.SUCCESS }}
	opts := detectOpts()
	opts.CPUOnly = true
	fp, err := Detect(context.Background(), lib, opts)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Kind != KindCPU || len(fp.GPUs) != 0 || fp.Class() != ClassCPU || !strings.HasPrefix(fp.PlatformKey(), "cpu-") {
		t.Errorf("fingerprint %+v, key %q", fp, fp.PlatformKey())
	}
	if calls := nvmlCalls(lib); len(calls) != 0 {
		t.Errorf("NVML was called: %v", calls)
	}
}
