package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DetectOptions are what Detect cannot find out by itself.
type DetectOptions struct {
	// TensorRTVersion ("10.3.0") and TensorRTBuild ("26"), as trt read
	// them from trtexec; part of a GPU platform key.
	TensorRTVersion string
	TensorRTBuild   string
	// ORTVersion is the ONNX Runtime version; part of a CPU platform key.
	ORTVersion string
	// Class overrides the default target class (Fingerprint.TargetClass).
	Class string
	// RequireGPU makes the absence of a usable GPU an error instead of a
	// CPU fingerprint.
	RequireGPU bool
	// CPUInfoPath is read instead of /proc/cpuinfo (tests).
	CPUInfoPath string
	// CPUOnly describes the CPU and never asks NVML: for work that runs on
	// the CPU of a machine that may also have GPUs (ONNX Runtime's CPU
	// candidates tuned for the cpu class).
	CPUOnly bool
}

// ErrNoGPU is wrapped by Detect's error when RequireGPU is set and the
// machine has no usable GPU.
var ErrNoGPU = errors.New("no usable NVIDIA GPU")

// NVMLError is an NVML call that failed.
type NVMLError struct {
	Op  string      // the go-nvml call, e.g. "Init", "DeviceGetCount"
	Ret nvml.Return // its return code
}

func (e *NVMLError) Error() string { return "nvml: " + e.Op + ": " + retName(e.Ret) }

// Symbols probed with Extensions().LookupSymbol before use: functions that
// appeared after the oldest driver we may meet, or that NVML 13 deprecates.
const (
	symArchitecture    = "nvmlDeviceGetArchitecture"
	symMigMode         = "nvmlDeviceGetMigMode"
	symCudaDriver      = "nvmlSystemGetCudaDriverVersion"
	symClocksEvent     = "nvmlDeviceGetCurrentClocksEventReasons"
	symClocksThrottle  = "nvmlDeviceGetCurrentClocksThrottleReasons"
	symTemperature     = "nvmlDeviceGetTemperature"
	symEnergy          = "nvmlDeviceGetTotalEnergyConsumption"
	symEccTotal        = "nvmlDeviceGetTotalEccErrors"
	symEventSetCreate  = "nvmlEventSetCreate"
	symSupportedEvents = "nvmlDeviceGetSupportedEventTypes"
	symUtilization     = "nvmlDeviceGetUtilizationRates"
)

// DefaultLibrary is the process's one handle on the system's NVML library
// (libnvidia-ml.so.1, opened at run time by Init). Share it between Detect
// and every Monitor: Init and Shutdown are reference counted per handle,
// while separate handles loading concurrently race inside go-nvml (it swaps
// a package-level error-string function on load and close).
var DefaultLibrary = sync.OnceValue(func() nvml.Interface { return nvml.New() })

// DetectDefault detects the platform through DefaultLibrary. On a machine
// without an NVIDIA driver it returns the CPU fingerprint and no error.
func DetectDefault(ctx context.Context, opts DetectOptions) (Fingerprint, error) {
	return Detect(ctx, DefaultLibrary(), opts)
}

// Detect builds the fingerprint of this machine through lib.
//
// When lib.Init fails with ERROR_LIBRARY_NOT_FOUND or ERROR_DRIVER_NOT_LOADED
// (no driver) Detect returns the CPU fingerprint and no error. Any other
// Init failure (no permission to the device nodes, a broken driver) is
// returned as an *NVMLError together with the CPU fingerprint, so that the
// caller decides whether to run as a CPU worker. After a failed Init no
// other NVML function is called. After a successful one, Shutdown is called
// before returning. Device calls that fail for a GPU (name, UUID, compute
// capability, count) are errors; optional details (architecture, memory,
// PCI, MIG mode, CUDA driver version) are left empty with a note.
func Detect(ctx context.Context, lib nvml.Interface, opts DetectOptions) (Fingerprint, error) {
	if opts.CPUOnly {
		return baseFingerprint(opts), nil
	}
	if err := ctx.Err(); err != nil {
		return Fingerprint{}, err
	}
	fp := baseFingerprint(opts)
	cpuFP := func(note string) Fingerprint {
		out := fp
		out.Kind = KindCPU
		out.Notes = append(append([]string(nil), fp.Notes...), note)
		return out
	}
	if lib == nil {
		return noGPU(cpuFP("no NVML library given"), opts, nil)
	}

	if ret := lib.Init(); ret != nvml.SUCCESS {
		// Never call NVML again: with the library missing every other
		// function is an undefined symbol that kills the process.
		err := &NVMLError{Op: "Init", Ret: ret}
		out := cpuFP(fmt.Sprintf("NVML unavailable (%s): CPU fingerprint", retName(ret)))
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return noGPU(out, opts, err)
		}
		if opts.RequireGPU {
			return out, fmt.Errorf("gpu: %w: %w", ErrNoGPU, err)
		}
		return out, err
	}
	defer lib.Shutdown()

	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		fp.DriverVersion = v
	} else {
		fp.Notes = append(fp.Notes, "driver version: "+retName(ret))
	}
	if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		fp.NVMLVersion = v
	}
	if hasSymbol(lib, symCudaDriver) {
		if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
			fp.CUDADriverVersion = cudaVersion(v)
		} else {
			fp.Notes = append(fp.Notes, "CUDA driver version: "+retName(ret))
		}
	} else {
		fp.Notes = append(fp.Notes, symCudaDriver+" missing: CUDA driver version not recorded")
	}

	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return cpuFP("NVML device count failed"), &NVMLError{Op: "DeviceGetCount", Ret: ret}
	}
	if n == 0 {
		return noGPU(cpuFP("NVML found no GPU: CPU fingerprint"), opts, nil)
	}
	probe := probeSymbols(lib, symArchitecture, symMigMode)
	for _, s := range []string{symArchitecture, symMigMode} {
		if !probe[s] {
			fp.Notes = append(fp.Notes, s+" missing in this driver: not recorded")
		}
	}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return Fingerprint{}, err
		}
		g, err := detectDevice(lib, i, probe)
		if err != nil {
			return Fingerprint{}, err
		}
		fp.GPUs = append(fp.GPUs, g)
	}
	fp.Kind = KindGPU
	return fp, nil
}

// noGPU returns the CPU fingerprint, or an error wrapping ErrNoGPU when a GPU
// was required.
func noGPU(fp Fingerprint, opts DetectOptions, cause error) (Fingerprint, error) {
	if !opts.RequireGPU {
		return fp, nil
	}
	if cause != nil {
		return fp, fmt.Errorf("gpu: %w: %w", ErrNoGPU, cause)
	}
	return fp, fmt.Errorf("gpu: %w: %s", ErrNoGPU, fp.Notes[len(fp.Notes)-1])
}

func baseFingerprint(opts DetectOptions) Fingerprint {
	fp := Fingerprint{
		Format:          FingerprintFormat,
		Kind:            KindCPU,
		OS:              runtime.GOOS,
		Arch:            runtime.GOARCH,
		TensorRTVersion: opts.TensorRTVersion,
		TensorRTBuild:   opts.TensorRTBuild,
		ORTVersion:      opts.ORTVersion,
		TargetClass:     opts.Class,
	}
	if h, err := os.Hostname(); err == nil {
		fp.Host = h
	}
	c, err := DetectCPU(opts.CPUInfoPath)
	fp.CPU = c
	if err != nil {
		fp.Notes = append(fp.Notes, "cpu: "+err.Error())
	}
	return fp
}

func detectDevice(lib nvml.Interface, i int, probe map[string]bool) (GPU, error) {
	g := GPU{Index: i}
	d, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return g, &NVMLError{Op: fmt.Sprintf("DeviceGetHandleByIndex(%d)", i), Ret: ret}
	}
	fail := func(op string, ret nvml.Return) error {
		return &NVMLError{Op: fmt.Sprintf("GPU %d: %s", i, op), Ret: ret}
	}
	if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return g, fail("GetName", ret)
	}
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return g, fail("GetUUID", ret)
	}
	major, minor, ret := d.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return g, fail("GetCudaComputeCapability", ret)
	}
	g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemoryTotal = m.Total
	}
	if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(p.BusId[:])
		if p.PciDeviceId != 0 {
			g.PCIDeviceID = fmt.Sprintf("0x%08x", p.PciDeviceId)
		}
	}
	if probe[symArchitecture] {
		if a, ret := d.GetArchitecture(); ret == nvml.SUCCESS {
			g.Architecture = archName(a)
		}
	}
	if probe[symMigMode] {
		if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS {
			g.MIGEnabled = cur == nvml.DEVICE_MIG_ENABLE
		}
	}
	return g, nil
}

// hasSymbol reports whether the loaded NVML library exports name. Only call
// it after a successful Init.
func hasSymbol(lib nvml.Interface, name string) bool {
	ext := lib.Extensions()
	if ext == nil {
		return false
	}
	return ext.LookupSymbol(name) == nil
}

func probeSymbols(lib nvml.Interface, names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = hasSymbol(lib, n)
	}
	return m
}

// cudaVersion turns NVML's integer (12040) into "12.4".
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

func archName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "volta"
	case nvml.DEVICE_ARCH_TURING:
		return "turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "blackwell"
	}
	return fmt.Sprintf("arch%d", a)
}

// retName names an NVML return code without calling NVML (Return.Error
// calls nvmlErrorString once the library is loaded, which must not happen
// after a failed Init).
func retName(r nvml.Return) string {
	switch r {
	case nvml.SUCCESS:
		return "SUCCESS"
	case nvml.ERROR_UNINITIALIZED:
		return "ERROR_UNINITIALIZED"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "ERROR_INVALID_ARGUMENT"
	case nvml.ERROR_NOT_SUPPORTED:
		return "ERROR_NOT_SUPPORTED"
	case nvml.ERROR_NO_PERMISSION:
		return "ERROR_NO_PERMISSION"
	case nvml.ERROR_ALREADY_INITIALIZED:
		return "ERROR_ALREADY_INITIALIZED"
	case nvml.ERROR_NOT_FOUND:
		return "ERROR_NOT_FOUND"
	case nvml.ERROR_INSUFFICIENT_SIZE:
		return "ERROR_INSUFFICIENT_SIZE"
	case nvml.ERROR_INSUFFICIENT_POWER:
		return "ERROR_INSUFFICIENT_POWER"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "ERROR_DRIVER_NOT_LOADED (the NVIDIA kernel driver is not running)"
	case nvml.ERROR_TIMEOUT:
		return "ERROR_TIMEOUT"
	case nvml.ERROR_IRQ_ISSUE:
		return "ERROR_IRQ_ISSUE"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "ERROR_LIBRARY_NOT_FOUND (libnvidia-ml.so.1 not found: no NVIDIA driver)"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "ERROR_FUNCTION_NOT_FOUND"
	case nvml.ERROR_CORRUPTED_INFOROM:
		return "ERROR_CORRUPTED_INFOROM"
	case nvml.ERROR_GPU_IS_LOST:
		return "ERROR_GPU_IS_LOST"
	case nvml.ERROR_RESET_REQUIRED:
		return "ERROR_RESET_REQUIRED"
	case nvml.ERROR_OPERATING_SYSTEM:
		return "ERROR_OPERATING_SYSTEM"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "ERROR_LIB_RM_VERSION_MISMATCH (driver library and kernel module differ)"
	case nvml.ERROR_IN_USE:
		return "ERROR_IN_USE"
	case nvml.ERROR_MEMORY:
		return "ERROR_MEMORY"
	case nvml.ERROR_NO_DATA:
		return "ERROR_NO_DATA"
	case nvml.ERROR_UNKNOWN:
		return "ERROR_UNKNOWN"
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}
