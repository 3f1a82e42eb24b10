package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// CPU describes the processor of a worker.
type CPU struct {
	// Model is the marketing name, e.g. "Intel(R) Xeon(R) Platinum 8480+";
	// on arm64, where /proc/cpuinfo has no model name, the core name from
	// the implementer and part numbers, e.g. "ARM Neoverse-V2".
	Model  string `json:"model"`
	Vendor string `json:"vendor,omitempty"`
	// Flags are the instruction-set extensions that matter for inference
	// kernels (FlagsOfInterest), sorted.
	Flags []string `json:"flags,omitempty"`
	// Usable is runtime.NumCPU(): the logical CPUs this process may run on.
	Usable int `json:"usable_cpus"`
	// Threads is the number of logical CPUs the machine has, Cores the
	// physical cores and Sockets the packages; 0 when unknown.
	Threads int `json:"threads,omitempty"`
	Cores   int `json:"cores,omitempty"`
	Sockets int `json:"sockets,omitempty"`
	// Source says where the data came from: "/proc/cpuinfo" or "cpuid".
	Source string `json:"source,omitempty"`
}

// FlagsOfInterest are the /proc/cpuinfo flags kept in CPU.Flags: the x86
// vector and matrix extensions and the arm64 SIMD, SVE and matrix features
// that ONNX Runtime's kernels dispatch on. "neon" is added on arm64 when the
// kernel reports "asimd".
var FlagsOfInterest = []string{
	// x86
	"sse4_2", "avx", "avx2", "fma", "f16c",
	"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
	"avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
	"amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
	// arm64
	"neon", "asimd", "asimdhp", "asimddp", "fphp", "bf16", "i8mm",
	"sve", "sve2", "svebf16", "svei8mm", "sme", "sme2",
}

var interesting = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range FlagsOfInterest {
		m[f] = true
	}
	return m
}()

// armImplementers and armParts name arm64 cores from /proc/cpuinfo's
// "CPU implementer" and "CPU part" (values from the Arm technical reference
// manuals and Linux's arch/arm64/include/asm/cputype.h).
var armImplementers = map[string]string{
	"0x41": "ARM", "0x42": "Broadcom", "0x43": "Cavium", "0x46": "Fujitsu",
	"0x48": "HiSilicon", "0x4e": "NVIDIA", "0x50": "APM", "0x51": "Qualcomm",
	"0x61": "Apple", "0xc0": "Ampere",
}

var armParts = map[string]string{
	"0xd03": "Cortex-A53", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
	"0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0b": "Cortex-A76",
	"0xd0c": "Neoverse-N1", "0xd0d": "Cortex-A77", "0xd40": "Neoverse-V1",
	"0xd41": "Cortex-A78", "0xd44": "Cortex-X1", "0xd47": "Cortex-A710",
	"0xd49": "Neoverse-N2", "0xd4f": "Neoverse-V2", "0xd84": "Neoverse-V3",
	"0xd8e": "Neoverse-N3",
}

// ParseCPUInfo reads the text of Linux's /proc/cpuinfo (x86 or arm64). It
// fills Model, Vendor, Flags, Threads, Cores and Sockets; Usable is left to
// the caller. An input without a single processor entry is an error.
func ParseCPUInfo(r io.Reader) (CPU, error) {
	p := cpuinfo{cores: map[string]bool{}, sockets: map[string]bool{}, flags: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				p.endEntry()
			}
			continue
		}
		p.field(strings.TrimSpace(key), strings.TrimSpace(val))
	}
	p.endEntry()
	if err := sc.Err(); err != nil {
		return CPU{}, fmt.Errorf("gpu: reading cpuinfo: %w", err)
	}
	if p.c.Threads == 0 {
		return CPU{}, errors.New("gpu: cpuinfo has no processor entries")
	}
	return p.cpu(), nil
}

// cpuinfo accumulates /proc/cpuinfo's entries (one per logical CPU,
// separated by blank lines).
type cpuinfo struct {
	c                         CPU
	implementer, part         string
	cores, sockets            map[string]bool
	physID, coreID            string
	haveTopology              bool
	flags                     map[string]bool
	sawFlags                  bool
	armModelName, firstVendor string
}

// endEntry counts the physical core and socket of the entry just read.
func (p *cpuinfo) endEntry() {
	if p.physID != "" && p.coreID != "" {
		p.cores[p.physID+"/"+p.coreID] = true
		p.haveTopology = true
	}
	if p.physID != "" {
		p.sockets[p.physID] = true
	}
	p.physID, p.coreID = "", ""
}

// field takes one "key : value" line.
func (p *cpuinfo) field(key, val string) {
	switch key {
	case "processor":
		// On x86 every entry starts with "processor"; older arm64
		// kernels print a "Processor" line with the model instead.
		p.c.Threads++
	case "Processor":
		p.armModelName = val
	case "model name":
		if p.c.Model == "" {
			p.c.Model = val
		}
	case "vendor_id":
		if p.firstVendor == "" {
			p.firstVendor = val
		}
	case "physical id":
		p.physID = val
	case "core id":
		p.coreID = val
	case "flags", "Features":
		if p.sawFlags {
			return // identical on every entry; read the first
		}
		p.sawFlags = true
		for _, f := range strings.Fields(val) {
			if interesting[f] {
				p.flags[f] = true
			}
			if f == "asimd" {
				p.flags["neon"] = true
			}
		}
	case "CPU implementer":
		if p.implementer == "" {
			p.implementer = strings.ToLower(val)
		}
	case "CPU part":
		if p.part == "" {
			p.part = strings.ToLower(val)
		}
	}
}

// cpu names the vendor and model (x86 vendor ids; arm64 implementer and
// part numbers) and counts what was read.
func (p *cpuinfo) cpu() CPU {
	c := p.c
	switch p.firstVendor {
	case "GenuineIntel":
		c.Vendor = "Intel"
	case "AuthenticAMD":
		c.Vendor = "AMD"
	default:
		c.Vendor = p.firstVendor
	}
	if p.implementer != "" {
		vendor := armImplementers[p.implementer]
		if vendor == "" {
			vendor = "implementer " + p.implementer
		}
		if c.Vendor == "" {
			c.Vendor = vendor
		}
		if c.Model == "" || strings.HasPrefix(c.Model, "ARMv") {
			if name, ok := armParts[p.part]; ok && p.implementer == "0x41" {
				c.Model = vendor + " " + name
			} else if p.part != "" {
				c.Model = vendor + " part " + p.part
			}
		}
	}
	if c.Model == "" {
		c.Model = p.armModelName
	}
	if p.haveTopology {
		c.Cores = len(p.cores)
	}
	c.Sockets = len(p.sockets)
	for f := range p.flags {
		c.Flags = append(c.Flags, f)
	}
	sort.Strings(c.Flags)
	c.Source = "/proc/cpuinfo"
	return c
}

// DetectCPU describes this machine's CPU from the cpuinfo file at path
// ("" means /proc/cpuinfo); where that file does not exist (other
// operating systems) it asks the processor itself through CPUID.
func DetectCPU(path string) (CPU, error) {
	if path == "" {
		path = "/proc/cpuinfo"
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && runtime.GOOS != "linux" {
		return cpuFromCPUID(), nil
	}
	if err != nil {
		return cpuFromCPUID(), fmt.Errorf("gpu: %w", err)
	}
	defer f.Close()
	c, err := ParseCPUInfo(f)
	if err != nil {
		return cpuFromCPUID(), fmt.Errorf("gpu: %s: %w", path, err)
	}
	c.Usable = runtime.NumCPU()
	return c, nil
}

// cpuFromCPUID is the portable fallback.
func cpuFromCPUID() CPU {
	c := CPU{
		Model:   strings.TrimSpace(cpuid.CPU.BrandName),
		Vendor:  cpuid.CPU.VendorString,
		Usable:  runtime.NumCPU(),
		Threads: cpuid.CPU.LogicalCores,
		Cores:   cpuid.CPU.PhysicalCores,
		Source:  "cpuid",
	}
	for _, f := range cpuid.CPU.FeatureSet() {
		name := strings.ToLower(f)
		switch name {
		case "avx512vnni":
			name = "avx512_vnni"
		case "avx512bf16":
			name = "avx512_bf16"
		case "avx512fp16":
			name = "avx512_fp16"
		case "avxvnni":
			name = "avx_vnni"
		case "amxtile":
			name = "amx_tile"
		case "amxbf16":
			name = "amx_bf16"
		case "amxint8":
			name = "amx_int8"
		case "amxfp16":
			name = "amx_fp16"
		case "sse42":
			name = "sse4_2"
		case "fma3":
			name = "fma"
		case "sme":
			continue // cpuid's SME is AMD Secure Memory Encryption, not Arm SME
		case "asimd":
			c.Flags = append(c.Flags, "neon")
		}
		if interesting[name] {
			c.Flags = append(c.Flags, name)
		}
	}
	sort.Strings(c.Flags)
	c.Flags = dedupSorted(c.Flags)
	return c
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
