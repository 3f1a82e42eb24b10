package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// FingerprintFormat is the format string of a serialized Fingerprint.
const FingerprintFormat = "tunefleet.fingerprint/v1"

// Kinds of fingerprint.
const (
	KindGPU = "gpu"
	KindCPU = "cpu"
)

// ClassCPU is the target class of CPU work, which every machine can serve.
const ClassCPU = "cpu"

// MaxKeyLen bounds the length of a platform key. A longer key keeps its
// first part and ends in a hash of the whole key, so it stays unique and
// stable.
const MaxKeyLen = 96

// Fingerprint is what a worker knows about the platform it runs on.
type Fingerprint struct {
	Format string `json:"format"`
	// Kind is KindGPU when NVML reported at least one GPU, else KindCPU.
	Kind string `json:"kind"`
	// OS and Arch are runtime.GOOS and runtime.GOARCH of the worker.
	OS   string `json:"os"`
	Arch string `json:"arch"`
	Host string `json:"host,omitempty"`

	// GPUs in NVML index order (nvidia-smi's order, not CUDA's).
	GPUs []GPU `json:"gpus,omitempty"`
	// DriverVersion is the NVIDIA driver version, e.g. "550.54.15".
	DriverVersion string `json:"driver_version,omitempty"`
	// CUDADriverVersion is the CUDA version the driver supports, e.g. "12.4".
	CUDADriverVersion string `json:"cuda_driver_version,omitempty"`
	NVMLVersion       string `json:"nvml_version,omitempty"`
	// TensorRTVersion ("10.3.0") and TensorRTBuild ("26") come from the
	// caller, which reads them from trtexec's banner.
	TensorRTVersion string `json:"tensorrt_version,omitempty"`
	TensorRTBuild   string `json:"tensorrt_build,omitempty"`

	// CPU is filled on every machine; it is the platform of a CPU worker
	// and a record on a GPU worker.
	CPU CPU `json:"cpu"`
	// ORTVersion is the ONNX Runtime version, from the caller.
	ORTVersion string `json:"ort_version,omitempty"`

	// TargetClass overrides the default class derived from the GPU name.
	TargetClass string `json:"class,omitempty"`
	// Notes say what was not detected and why (no driver, missing symbol).
	Notes []string `json:"notes,omitempty"`
}

// GPU is one NVIDIA device as NVML reports it.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	// ComputeCapability is "major.minor", e.g. "9.0".
	ComputeCapability string `json:"compute_capability"`
	Architecture      string `json:"architecture,omitempty"`
	MemoryTotal       uint64 `json:"memory_total_bytes,omitempty"`
	PCIBusID          string `json:"pci_bus_id,omitempty"`
	// PCIDeviceID is NVML's combined device and vendor id, e.g. "0x233010de".
	PCIDeviceID string `json:"pci_device_id,omitempty"`
	MIGEnabled  bool   `json:"mig_enabled,omitempty"`
}

// SM is the compute capability without the dot, e.g. "sm90".
func (g GPU) SM() string {
	cc := strings.ReplaceAll(g.ComputeCapability, ".", "")
	if cc == "" {
		return "smunknown"
	}
	return "sm" + keySlug(cc)
}

// PlatformKey is the stable, path-safe name of the platform: what engines,
// results and timing caches are stored under. For a GPU fingerprint it is
// built from the first GPU (see ForDevice for the others):
//
//	gpu-<gpu name>-sm<cc>-trt<version>[.<build>]-drv<driver major>[-mig][-<os>-<arch>]
//	cpu-<cpu model>[-<isa tier>]-ort<version>[-<os>-<arch>]
//
// for example "gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550" or
// "cpu-intel-xeon-platinum-8480plus-amx-ort1.24.1". The OS and architecture
// are omitted for linux/amd64. The ISA tier (ISATier) is in CPU keys because
// virtual machines often report a generic model ("Intel(R) Xeon(R)
// Processor") and hypervisors may hide extensions, while ONNX Runtime picks
// its kernels by them. Keys hold only [a-z0-9._-] and are at most MaxKeyLen
// long.
func (f Fingerprint) PlatformKey() string {
	if f.Kind == KindGPU && len(f.GPUs) > 0 {
		return f.deviceKey(0)
	}
	parts := []string{"cpu", cpuModelSlug(f.CPU)}
	if isa := ISATier(f.CPU.Flags); isa != "" {
		parts = append(parts, isa)
	}
	if v := keySlug(f.ORTVersion); v != "" {
		parts = append(parts, "ort"+v)
	} else {
		parts = append(parts, "ortnone")
	}
	return finishKey(parts, f.OS, f.Arch)
}

// DeviceKey is the platform key of GPU i (its position in GPUs). It is ""
// when there is no such GPU.
func (f Fingerprint) DeviceKey(i int) string {
	if f.Kind != KindGPU || i < 0 || i >= len(f.GPUs) {
		return ""
	}
	return f.deviceKey(i)
}

func (f Fingerprint) deviceKey(i int) string {
	g := f.GPUs[i]
	name := keySlug(g.Name)
	if name == "" {
		name = "unknown-gpu"
	}
	parts := []string{"gpu", name, g.SM()}
	trt := keySlug(f.TensorRTVersion)
	if b := keySlug(f.TensorRTBuild); trt != "" && b != "" {
		trt += "." + b
	}
	if trt == "" {
		trt = "none"
	}
	parts = append(parts, "trt"+trt)
	drv := keySlug(driverMajor(f.DriverVersion))
	if drv == "" {
		drv = "unknown"
	}
	parts = append(parts, "drv"+drv)
	if g.MIGEnabled {
		parts = append(parts, "mig")
	}
	return finishKey(parts, f.OS, f.Arch)
}

// Keys are the distinct platform keys of the machine: one per GPU model on
// a GPU machine, one for a CPU machine.
func (f Fingerprint) Keys() []string {
	if f.Kind != KindGPU || len(f.GPUs) == 0 {
		return []string{f.PlatformKey()}
	}
	var keys []string
	seen := map[string]bool{}
	for i := range f.GPUs {
		k := f.deviceKey(i)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// Homogeneous reports whether all GPUs share one platform key (always true
// for a CPU fingerprint). A worker with mixed GPUs should run one slot per
// GPU with ForDevice.
func (f Fingerprint) Homogeneous() bool { return len(f.Keys()) == 1 }

// ForDevice returns the fingerprint restricted to GPU i, whose PlatformKey
// and Class are that GPU's.
func (f Fingerprint) ForDevice(i int) (Fingerprint, error) {
	if f.Kind != KindGPU || i < 0 || i >= len(f.GPUs) {
		return Fingerprint{}, fmt.Errorf("gpu: no GPU %d on this machine (%d GPUs)", i, len(f.GPUs))
	}
	out := f
	out.GPUs = []GPU{f.GPUs[i]}
	out.Notes = append([]string(nil), f.Notes...)
	return out, nil
}

// Class is the target class of the worker, also the name of the queue it
// serves: TargetClass when set, "cpu" for a CPU fingerprint, else the
// default class of the first GPU's name (DefaultClass).
func (f Fingerprint) Class() string {
	if f.TargetClass != "" {
		return f.TargetClass
	}
	if f.Kind != KindGPU || len(f.GPUs) == 0 {
		return ClassCPU
	}
	return DefaultClass(f.GPUs[0].Name)
}

// finishKey joins the parts, adds the OS and architecture unless they are
// linux/amd64 (or unknown), and bounds the length.
func finishKey(parts []string, goos, goarch string) string {
	if (goos != "" && goos != "linux") || (goarch != "" && goarch != "amd64") {
		parts = append(parts, keySlug(orDefault(goos, "linux")), keySlug(orDefault(goarch, "amd64")))
	}
	key := strings.Join(parts, "-")
	if len(key) <= MaxKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:])[:12]
	head := strings.TrimRight(key[:MaxKeyLen-len(suffix)], "-.")
	return head + suffix
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// keySlug lowercases s and keeps [a-z0-9.]; every other run of characters
// becomes one '-'; '+' becomes "plus" ("8480+"). Leading and trailing
// separators are dropped.
func keySlug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		case r == '+':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteString("plus")
		default:
			dash = true
		}
	}
	return strings.Trim(b.String(), ".")
}

// driverMajor is the part of a driver version before the first dot.
func driverMajor(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// cpuModelSlug is the CPU model as it appears in a platform key: without
// trademark marks, the words "CPU" and "Processor" and the clock suffix
// ("@ 2.30GHz"), which add nothing to the SKU.
func cpuModelSlug(c CPU) string {
	m := strings.ToLower(c.Model)
	if i := strings.Index(m, "@"); i >= 0 {
		m = m[:i]
	}
	for _, junk := range []string{"(r)", "(tm)", "(c)", "®", "™"} {
		m = strings.ReplaceAll(m, junk, " ")
	}
	var words []string
	for _, w := range strings.Fields(m) {
		if w == "cpu" || w == "processor" {
			continue
		}
		words = append(words, w)
	}
	s := keySlug(strings.Join(words, " "))
	if s == "" {
		return "unknown-cpu"
	}
	return s
}

// ISATier is the best vector/matrix extension level in flags, the part of a
// CPU platform key that says which ONNX Runtime kernels run: "amx",
// "avx512", "avx2", "sse4" on x86; "sve2", "sve", "neon" on arm64; "" when
// none is known.
func ISATier(flags []string) string {
	has := func(f string) bool {
		for _, x := range flags {
			if x == f {
				return true
			}
		}
		return false
	}
	for _, t := range []struct{ flag, tier string }{
		{"amx_tile", "amx"}, {"avx512f", "avx512"}, {"avx2", "avx2"}, {"sse4_2", "sse4"},
		{"sve2", "sve2"}, {"sve", "sve"}, {"neon", "neon"}, {"asimd", "neon"},
	} {
		if has(t.flag) {
			return t.tier
		}
	}
	return ""
}
