package gpu

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var keyCharset = regexp.MustCompile(`^[a-z0-9._-]+$`)

func h100FP() Fingerprint {
	return Fingerprint{
		Format: FingerprintFormat, Kind: KindGPU, OS: "linux", Arch: "amd64",
		GPUs: []GPU{{
			Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-0c4f3a2e-1111-2222-3333-444455556666",
			ComputeCapability: "9.0", MemoryTotal: 80 << 30,
		}},
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4",
		TensorRTVersion: "10.3.0", TensorRTBuild: "26",
		CPU: CPU{Model: "Intel(R) Xeon(R) Platinum 8480+"}, ORTVersion: "1.24.1",
	}
}

func TestPlatformKey(t *testing.T) {
	t.Parallel()
	cpu := func(model, ort, goos, goarch string) Fingerprint {
		return Fingerprint{Kind: KindCPU, OS: goos, Arch: goarch, CPU: CPU{Model: model}, ORTVersion: ort}
	}
	mod := func(f func(*Fingerprint)) Fingerprint {
		fp := h100FP()
		f(&fp)
		return fp
	}
	tests := []struct {
		name string
		fp   Fingerprint
		want string
	}{
		{"h100", h100FP(), "gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550"},
		{"a100 sxm", mod(func(f *Fingerprint) {
			f.GPUs[0].Name, f.GPUs[0].ComputeCapability = "NVIDIA A100-SXM4-40GB", "8.0"
		}), "gpu-nvidia-a100-sxm4-40gb-sm80-trt10.3.0.26-drv550"},
		{"rtx 3090, trt 8.6", mod(func(f *Fingerprint) {
			f.GPUs[0].Name, f.GPUs[0].ComputeCapability = "NVIDIA GeForce RTX 3090", "8.6"
			f.TensorRTVersion, f.TensorRTBuild, f.DriverVersion = "8.6.1", "6", "535.183.01"
		}), "gpu-nvidia-geforce-rtx-3090-sm86-trt8.6.1.6-drv535"},
		{"no build", mod(func(f *Fingerprint) { f.TensorRTBuild = "" }), "gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0-drv550"},
		{"no tensorrt", mod(func(f *Fingerprint) { f.TensorRTVersion, f.TensorRTBuild = "", "" }),
			"gpu-nvidia-h100-80gb-hbm3-sm90-trtnone-drv550"},
		{"no driver version", mod(func(f *Fingerprint) { f.DriverVersion = "" }),
			"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drvunknown"},
		{"mig", mod(func(f *Fingerprint) { f.GPUs[0].MIGEnabled = true }),
			"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550-mig"},
		{"arm64 host", mod(func(f *Fingerprint) {
			f.GPUs[0].Name, f.Arch = "NVIDIA GH200 480GB", "arm64"
		}), "gpu-nvidia-gh200-480gb-sm90-trt10.3.0.26-drv550-linux-arm64"},
		{"driver minor does not matter", mod(func(f *Fingerprint) { f.DriverVersion = "550.127.05" }),
			"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550"},
		{"cuda and memory do not matter", mod(func(f *Fingerprint) { f.CUDADriverVersion, f.GPUs[0].MemoryTotal = "12.8", 1 }),
			"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550"},
		{"intel xeon", cpu("Intel(R) Xeon(R) Platinum 8480+", "1.24.1", "linux", "amd64"), "cpu-intel-xeon-platinum-8480plus-ort1.24.1"},
		{"intel core with clock", cpu("Intel(R) Core(TM) i9-9900K CPU @ 3.60GHz", "1.24.1", "linux", "amd64"), "cpu-intel-core-i9-9900k-ort1.24.1"},
		{"amd epyc", cpu("AMD EPYC 7763 64-Core Processor", "1.22.0", "linux", "amd64"), "cpu-amd-epyc-7763-64-core-ort1.22.0"},
		{"neoverse", cpu("ARM Neoverse-V2", "1.24.1", "linux", "arm64"), "cpu-arm-neoverse-v2-ort1.24.1-linux-arm64"},
		{"apple", cpu("Apple M2 Pro", "1.24.1", "darwin", "arm64"), "cpu-apple-m2-pro-ort1.24.1-darwin-arm64"},
		{"unknown cpu, no ort", cpu("", "", "", ""), "cpu-unknown-cpu-ortnone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.fp.PlatformKey()
			if got != tc.want {
				t.Errorf("PlatformKey() = %q, want %q", got, tc.want)
			}
			if !keyCharset.MatchString(got) || len(got) > MaxKeyLen {
				t.Errorf("key %q is not path-safe or too long", got)
			}
			// Stable across calls and across a JSON round trip.
			b, err := json.Marshal(tc.fp)
			if err != nil {
				t.Fatal(err)
			}
			var back Fingerprint
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.PlatformKey() != got || tc.fp.PlatformKey() != got {
				t.Errorf("key not stable: %q vs %q", back.PlatformKey(), got)
			}
		})
	}
}

func TestPlatformKeyDistinguishes(t *testing.T) {
	t.Parallel()
	base := h100FP()
	seen := map[string]string{base.PlatformKey(): "base"}
	for name, f := range map[string]func(*Fingerprint){
		"gpu model":   func(f *Fingerprint) { f.GPUs[0].Name = "NVIDIA H100 PCIe" },
		"cc":          func(f *Fingerprint) { f.GPUs[0].ComputeCapability = "9.1" },
		"trt version": func(f *Fingerprint) { f.TensorRTVersion = "10.3.1" },
		"trt build":   func(f *Fingerprint) { f.TensorRTBuild = "27" },
		"driver":      func(f *Fingerprint) { f.DriverVersion = "560.28.03" },
		"arch":        func(f *Fingerprint) { f.Arch = "arm64" },
		"os":          func(f *Fingerprint) { f.OS = "windows" },
		"mig":         func(f *Fingerprint) { f.GPUs[0].MIGEnabled = true },
	} {
		fp := h100FP()
		f(&fp)
		k := fp.PlatformKey()
		if prev, dup := seen[k]; dup {
			t.Errorf("%s gives the same key as %s: %q", name, prev, k)
		}
		seen[k] = name
	}
}

func TestPlatformKeyCharsetAndLength(t *testing.T) {
	t.Parallel()
	names := []string{
		"NVIDIA RTX 6000 Ada Generation",
		"NVIDIA RTX PRO 6000 Blackwell Server Edition",
		"Tesla V100-SXM2-16GB",
		"../../etc/passwd",
		"GPU with spaces / slashes \\ and ümlauts™ and $(shell)",
		"..",
		strings.Repeat("VeryLongGPUName ", 20),
		"",
	}
	for _, n := range names {
		fp := h100FP()
		fp.GPUs[0].Name = n
		fp.TensorRTVersion = "10.16.1/../x"
		k := fp.PlatformKey()
		if !keyCharset.MatchString(k) || len(k) > MaxKeyLen || strings.Contains(k, "/") || !strings.HasPrefix(k, "gpu-") {
			t.Errorf("name %q: key %q breaks the rules", n, k)
		}
		if k != fp.PlatformKey() {
			t.Errorf("name %q: key not stable", n)
		}
	}
	long := h100FP()
	long.GPUs[0].Name = strings.Repeat("VeryLongGPUName ", 20)
	other := long
	other.GPUs = []GPU{long.GPUs[0]}
	other.GPUs[0].Name += "2"
	k1, k2 := long.PlatformKey(), other.PlatformKey()
	if len(k1) != MaxKeyLen || k1 == k2 {
		t.Errorf("long keys: %q (%d) and %q should be %d long and differ", k1, len(k1), k2, MaxKeyLen)
	}
}

func TestDefaultClass(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"NVIDIA H100 80GB HBM3", "gpu.h100"},
		{"NVIDIA H100 PCIe", "gpu.h100"},
		{"NVIDIA H100 NVL", "gpu.h100"},
		{"NVIDIA H200 141GB HBM3e", "gpu.h200"},
		{"NVIDIA B200 180GB HBM3e", "gpu.b200"},
		{"NVIDIA GH200 480GB", "gpu.gh200"},
		{"NVIDIA A100-SXM4-40GB", "gpu.a100"},
		{"NVIDIA A100-SXM4-80GB", "gpu.a100"},
		{"NVIDIA A100 80GB PCIe", "gpu.a100"},
		{"Mock NVIDIA A100-SXM4-40GB", "gpu.a100"},
		{"NVIDIA A30-PCIE-24GB", "gpu.a30"},
		{"NVIDIA A10G", "gpu.a10g"},
		{"NVIDIA A10", "gpu.a10"},
		{"NVIDIA L4", "gpu.l4"},
		{"NVIDIA L40S", "gpu.l40s"},
		{"Tesla T4", "gpu.t4"},
		{"Tesla V100-SXM2-16GB", "gpu.v100"},
		{"NVIDIA GeForce RTX 3090", "gpu.rtx3090"},
		{"NVIDIA GeForce RTX 4090", "gpu.rtx4090"},
		{"NVIDIA GeForce RTX 4090 Laptop GPU", "gpu.rtx4090"},
		{"NVIDIA RTX A6000", "gpu.rtxa6000"},
		{"NVIDIA RTX 6000 Ada Generation", "gpu.rtx6000ada"},
		{"Quadro RTX 8000", "gpu.rtx8000"},
		{"NVIDIA TITAN RTX", "gpu.titanrtx"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu.rtxpro6000blackwell"},
		{"NVIDIA", "gpu"},
		{"", "gpu"},
	}
	target := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) // jobs.CheckTarget
	for _, tc := range tests {
		got := DefaultClass(tc.name)
		if got != tc.want {
			t.Errorf("DefaultClass(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if !target.MatchString(got) {
			t.Errorf("DefaultClass(%q) = %q is not a valid queue name", tc.name, got)
		}
	}
	if c := DefaultClass(strings.Repeat("x", 500)); len(c) > 64 {
		t.Errorf("class too long: %d", len(c))
	}
}

func TestFingerprintClass(t *testing.T) {
	t.Parallel()
	fp := h100FP()
	if got := fp.Class(); got != "gpu.h100" {
		t.Errorf("Class() = %q", got)
	}
	fp.TargetClass = "gpu.h100-sxm"
	if got := fp.Class(); got != "gpu.h100-sxm" {
		t.Errorf("Class() with override = %q", got)
	}
	cpu := Fingerprint{Kind: KindCPU, CPU: CPU{Model: "x"}}
	if got := cpu.Class(); got != "cpu" {
		t.Errorf("CPU Class() = %q", got)
	}
	if got := (Fingerprint{}).Class(); got != "cpu" {
		t.Errorf("zero Class() = %q", got)
	}
}

func TestHeterogeneousMachine(t *testing.T) {
	t.Parallel()
	fp := h100FP()
	fp.GPUs = append(fp.GPUs,
		GPU{Index: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-b", ComputeCapability: "9.0"},
		GPU{Index: 2, Name: "NVIDIA L4", UUID: "GPU-c", ComputeCapability: "8.9"})
	if fp.Homogeneous() {
		t.Fatal("H100+L4 reported homogeneous")
	}
	keys := fp.Keys()
	if len(keys) != 2 || keys[0] != fp.PlatformKey() || keys[1] != "gpu-nvidia-l4-sm89-trt10.3.0.26-drv550" {
		t.Errorf("Keys() = %q", keys)
	}
	l4, err := fp.ForDevice(2)
	if err != nil {
		t.Fatal(err)
	}
	if l4.PlatformKey() != keys[1] || l4.Class() != "gpu.l4" || len(l4.GPUs) != 1 || fp.DeviceKey(2) != keys[1] {
		t.Errorf("ForDevice(2): key %q class %q", l4.PlatformKey(), l4.Class())
	}
	if _, err := fp.ForDevice(3); err == nil {
		t.Error("ForDevice(3) on a 3-GPU machine: no error")
	}
	if fp.DeviceKey(-1) != "" || fp.DeviceKey(3) != "" {
		t.Error("DeviceKey out of range is not empty")
	}
	if !h100FP().Homogeneous() || !(Fingerprint{Kind: KindCPU}).Homogeneous() {
		t.Error("single-GPU or CPU fingerprint not homogeneous")
	}
}

func TestGPUSM(t *testing.T) {
	t.Parallel()
	for cc, want := range map[string]string{"9.0": "sm90", "8.6": "sm86", "10.0": "sm100", "12.1": "sm121", "": "smunknown"} {
		if got := (GPU{ComputeCapability: cc}).SM(); got != want {
			t.Errorf("SM(%q) = %q, want %q", cc, got, want)
		}
	}
}

func TestTextMentionsEverything(t *testing.T) {
	t.Parallel()
	fp := h100FP()
	fp.Notes = []string{"something degraded"}
	txt := NewInfo(fp, nil).Text()
	for _, want := range []string{
		"gpu-nvidia-h100-80gb-hbm3-sm90-trt10.3.0.26-drv550", "gpu.h100", "NVIDIA H100 80GB HBM3",
		"sm 9.0", "80.0 GiB", "550.54.15", "CUDA 12.4", "10.3.0 build 26", "GPU-0c4f3a2e", "something degraded",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("Text() lacks %q:\n%s", want, txt)
		}
	}
}
