package state

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Requires is what a machine must have to run a graph's engine, when the
// engine is tied to the hardware that built it. A graph without one runs
// on any machine of its platform's kind (an ONNX model of standard and
// com.microsoft operators on any CPU with ONNX Runtime).
//
// ONNX Runtime's "all" level rewrites convolutions into its NCHWc layout
// (domain com.microsoft.nchwc), padding weights to the channel block of
// the CPU that optimized the model. ONNX Runtime reads that block from the
// CPU it runs on, not from the model, so the model runs right only where
// the block is the same. A TensorRT plan runs only on GPUs of the compute
// capability it was built for, with the TensorRT version that built it.
type Requires struct {
	// Operators are the hardware-specific operator domains in the engine.
	Operators []string `json:"operators,omitempty"`
	// NCHWcBlock is the channel block of the NCHWc layout: 16 where the
	// x86-64 CPU has AVX-512F, 8 on any other x86-64 CPU (ONNX Runtime's
	// MLAS picks it so). The deploy machine must have the same block.
	NCHWcBlock int `json:"nchwc_block,omitempty"`
	// ISA are the CPU flags (as /proc/cpuinfo names them) that give that
	// block, ISAAbsent the ones that must be missing: a block of 8 does
	// not run where AVX-512F makes ONNX Runtime use 16.
	ISA       []string `json:"isa,omitempty"`
	ISAAbsent []string `json:"isa_absent,omitempty"`
	// Arch is the CPU architecture (Go's GOARCH) the engine was built on.
	Arch string `json:"arch,omitempty"`
	// ComputeCapability ("9.0") and TensorRT ("10.3.0"): a TensorRT plan's.
	ComputeCapability string `json:"compute_capability,omitempty"`
	TensorRT          string `json:"tensorrt,omitempty"`
}

// Empty says r requires nothing (any machine of the platform's kind).
func (r *Requires) Empty() bool {
	return r == nil || len(r.Operators) == 0 && r.NCHWcBlock == 0 && len(r.ISA) == 0 && len(r.ISAAbsent) == 0 &&
		r.Arch == "" && r.ComputeCapability == "" && r.TensorRT == ""
}

// NCHWcDomain is the operator domain of ONNX Runtime's NCHWc layout.
const NCHWcDomain = "com.microsoft.nchwc"

// NCHWcBlock is the NCHWc channel block ONNX Runtime uses on a CPU of
// architecture arch (GOARCH) with flags: 16 with AVX-512F, 8 on other
// x86-64 CPUs (MLAS's platform.cpp), 0 where it is not known.
func NCHWcBlock(arch string, flags []string) int {
	if arch != "amd64" && arch != "386" {
		return 0
	}
	if slices.Contains(flags, "avx512f") {
		return 16
	}
	return 8
}

// NCHWcRequires is the requirement of an ONNX Runtime model with
// operators of the hardware-specific domains ops, optimized on a CPU of
// architecture arch whose NCHWc block was block.
func NCHWcRequires(ops []string, arch string, block int) *Requires {
	if len(ops) == 0 {
		return nil
	}
	r := &Requires{Operators: slices.Sorted(slices.Values(ops)), Arch: arch, NCHWcBlock: block}
	switch {
	case block == 16:
		r.ISA = []string{"avx512f"}
	case block == 8 && (arch == "amd64" || arch == "386"):
		r.ISAAbsent = []string{"avx512f"}
	}
	return r
}

// Machine is what a deploy target offers, as far as Requires asks.
type Machine struct {
	// Name says which machine it is in messages ("platform cpu-…-avx2-…",
	// "this machine").
	Name string
	// Arch is the CPU architecture (GOARCH); Flags the CPU's flags.
	Arch  string
	Flags []string
	// ComputeCapability and TensorRT are the GPU's and the TensorRT
	// version's; empty on a CPU-only target.
	ComputeCapability string
	TensorRT          string
}

// CanRun says why machine m cannot run an engine that requires r, or nil
// when it can (always, for a nil r).
func (r *Requires) CanRun(m Machine) error {
	if r == nil {
		return nil
	}
	var why []string
	if r.Arch != "" && m.Arch != "" && r.Arch != m.Arch {
		why = append(why, fmt.Sprintf("it was optimized on %s, %s is %s", r.Arch, m.Name, m.Arch))
	}
	if r.NCHWcBlock > 0 {
		if got := NCHWcBlock(orArch(m.Arch, r.Arch), m.Flags); got != r.NCHWcBlock {
			why = append(why, fmt.Sprintf("its %s layout is padded to blocks of %d channels (%s), but ONNX Runtime uses blocks of %s on %s (%s)",
				strings.Join(r.Operators, ", "), r.NCHWcBlock, isaText(r), blockText(got), m.Name, flagsText(m.Flags)))
		}
	}
	if r.ComputeCapability != "" && m.ComputeCapability != r.ComputeCapability {
		why = append(why, fmt.Sprintf("its TensorRT plan was built for compute capability %s, %s has %s", r.ComputeCapability, m.Name, orNone(m.ComputeCapability)))
	}
	if r.TensorRT != "" && m.TensorRT != r.TensorRT {
		why = append(why, fmt.Sprintf("its TensorRT plan was built by TensorRT %s, %s has %s", r.TensorRT, m.Name, orNone(m.TensorRT)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(why, "; "))
}

func orArch(a, def string) string {
	if a == "" {
		return def
	}
	return a
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func isaText(r *Requires) string {
	switch {
	case len(r.ISA) > 0:
		return "needs " + strings.Join(r.ISA, ", ")
	case len(r.ISAAbsent) > 0:
		return "needs a CPU without " + strings.Join(r.ISAAbsent, ", ")
	}
	return "the optimizing CPU's"
}

func blockText(b int) string {
	if b == 0 {
		return "none it knows"
	}
	return strconv.Itoa(b)
}

func flagsText(flags []string) string {
	var vec []string
	for _, f := range flags {
		if strings.HasPrefix(f, "avx") || strings.HasPrefix(f, "sse") || f == "neon" {
			vec = append(vec, f)
		}
	}
	if len(vec) == 0 {
		return "no AVX"
	}
	return strings.Join(vec, " ")
}
