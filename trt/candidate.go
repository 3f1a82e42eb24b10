package trt

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
)

// Precision is one positional part of a trt candidate.
type Precision string

// The precisions a candidate may name. FP16 … Best are trtexec's
// weak-typing flags (--fp16, --bf16, --int8, --fp8, --best): they allow the
// builder to use that type where it is faster, on top of FP32. FP32 is "no
// flag" and StronglyTyped is --stronglyTyped: tensor types come from the
// ONNX model.
const (
	FP32          Precision = "fp32"
	FP16          Precision = "fp16"
	BF16          Precision = "bf16"
	INT8          Precision = "int8"
	FP8           Precision = "fp8"
	Best          Precision = "best"
	StronglyTyped Precision = "strongly-typed"
)

// weakOrder is the canonical order of weak-typing flags on a command line,
// so that "trt:int8:fp16" and "trt:fp16:int8" build the same command.
var weakOrder = []Precision{FP16, BF16, INT8, FP8, Best}

// NoTF32 is the positional that adds --noTF32 (FP32 math without TF32).
const NoTF32 = "noTF32"

// Limits of the numeric options.
const (
	MaxOptLevel = 5
	// MaxWorkspaceMiB is 1 PiB: far above any GPU, low enough that the
	// number stays exact through trtexec's float parsing.
	MaxWorkspaceMiB = 1 << 30
)

// Config is a parsed trt candidate: what trtexec is asked to build.
type Config struct {
	// Weak lists the weak-typing precisions in canonical order; empty with
	// StronglyTyped false means FP32 (TF32 allowed unless NoTF32).
	Weak          []Precision `json:"weak,omitempty"`
	StronglyTyped bool        `json:"strongly_typed,omitempty"`
	NoTF32        bool        `json:"no_tf32,omitempty"`
	// Calib is an INT8 calibration cache (--calib). A relative path is
	// resolved against the directory of the graph's ONNX file, so a bundle
	// can carry its cache next to the model. Empty means trtexec's dummy
	// dynamic ranges: the engine then only times INT8, its outputs are not
	// meaningful and the correctness check will say so.
	Calib string `json:"calib,omitempty"`
	// OptLevel is --builderOptimizationLevel (0…5); -1 leaves the builder
	// default (3).
	OptLevel int `json:"opt_level"`
	// WorkspaceMiB caps the builder's workspace pool; 0 leaves the default
	// (the GPU's memory).
	WorkspaceMiB int64 `json:"workspace_mib,omitempty"`
}

// Has reports whether the config names a weak-typing precision.
func (c Config) Has(p Precision) bool { return slices.Contains(c.Weak, p) }

// String renders the config the way a candidate would write it.
func (c Config) String() string {
	var parts []string
	for _, p := range c.Weak {
		parts = append(parts, string(p))
	}
	if c.StronglyTyped {
		parts = append(parts, string(StronglyTyped))
	}
	if len(parts) == 0 {
		parts = append(parts, string(FP32))
	}
	if c.NoTF32 {
		parts = append(parts, NoTF32)
	}
	if c.Calib != "" {
		parts = append(parts, "calib="+c.Calib)
	}
	if c.OptLevel >= 0 {
		parts = append(parts, "opt="+strconv.Itoa(c.OptLevel))
	}
	if c.WorkspaceMiB > 0 {
		parts = append(parts, "workspace="+strconv.FormatInt(c.WorkspaceMiB, 10))
	}
	return "trt:" + strings.Join(parts, ":")
}

// candidateForm is quoted in every parse error: what a trt candidate is.
const candidateForm = "trt:<precision>[:<precision>…][:noTF32][:opt=0..5][:workspace=MiB][:calib=FILE], precision one of fp32, fp16, bf16, int8, fp8, best, strongly-typed"

// ParseConfig interprets a trt candidate. It checks what is true of every
// TensorRT version; what a particular version can express is Supported's
// job, since the version is only known once trtexec has been run.
func ParseConfig(c backend.Candidate) (Config, error) {
	cfg := Config{OptLevel: -1}
	if c.Backend != "trt" {
		return Config{}, fmt.Errorf("candidate %q is not a trt candidate", c)
	}
	seen := map[string]bool{}
	fp32 := false
	for _, p := range c.Positionals {
		if seen[p] {
			return Config{}, fmt.Errorf("candidate %q: %q is given twice", c, p)
		}
		seen[p] = true
		switch Precision(p) {
		case FP32:
			fp32 = true
		case FP16, BF16, INT8, FP8, Best:
			cfg.Weak = append(cfg.Weak, Precision(p))
		case StronglyTyped:
			cfg.StronglyTyped = true
		default:
			switch {
			case p == NoTF32 || strings.EqualFold(p, "notf32"):
				cfg.NoTF32 = true
			case strings.EqualFold(p, "stronglyTyped"):
				return Config{}, fmt.Errorf("candidate %q: write strongly-typed, not %q", c, p)
			default:
				return Config{}, fmt.Errorf("candidate %q: unknown part %q (want %s)", c, p, candidateForm)
			}
		}
	}
	slices.SortFunc(cfg.Weak, func(a, b Precision) int {
		return slices.Index(weakOrder, a) - slices.Index(weakOrder, b)
	})
	switch {
	case fp32 && (len(cfg.Weak) > 0 || cfg.StronglyTyped):
		return Config{}, fmt.Errorf("candidate %q: fp32 means no reduced-precision flag; it cannot be combined with %s", c, otherPrecisions(cfg))
	case cfg.StronglyTyped && len(cfg.Weak) > 0:
		return Config{}, fmt.Errorf("candidate %q: strongly-typed takes every tensor type from the ONNX model, so %s cannot be added (trtexec would ignore it with a warning)", c, otherPrecisions(cfg))
	case cfg.Has(Best) && len(cfg.Weak) > 1:
		return Config{}, fmt.Errorf("candidate %q: best already allows fp16 and int8 (and bf16 from TensorRT 10); write trt:best alone", c)
	case cfg.Has(FP8) && cfg.Has(INT8):
		return Config{}, fmt.Errorf("candidate %q: trtexec does not allow fp8 and int8 together", c)
	}
	for k, v := range c.Options {
		switch k {
		case "opt":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxOptLevel {
				return Config{}, fmt.Errorf("candidate %q: opt=%s must be a builder optimization level from 0 to %d", c, v, MaxOptLevel)
			}
			cfg.OptLevel = n
		case "workspace":
			// A bare number of MiB only: trtexec's unit suffixes mean
			// different things in 8.6, 10.0 and 10.1+ ("4G" is 4 MiB on
			// 8.6, "1024MiB" is 1024 bytes on 10.1+), so none is accepted.
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > MaxWorkspaceMiB {
				return Config{}, fmt.Errorf("candidate %q: workspace=%s must be a whole number of MiB from 1 to %d, without a unit (e.g. workspace=4096 for 4 GiB)", c, v, MaxWorkspaceMiB)
			}
			cfg.WorkspaceMiB = n
		case "calib":
			if !cfg.Has(INT8) && !cfg.Has(Best) {
				return Config{}, fmt.Errorf("candidate %q: calib= is an INT8 calibration cache; it needs int8 or best", c)
			}
			if strings.ContainsAny(v, ",'") {
				return Config{}, fmt.Errorf("candidate %q: calibration file %q must not contain a comma or a quote", c, v)
			}
			cfg.Calib = v
		default:
			return Config{}, fmt.Errorf("candidate %q: unknown option %q (want opt, workspace or calib)", c, k)
		}
	}
	return cfg, nil
}

func otherPrecisions(cfg Config) string {
	var s []string
	for _, p := range cfg.Weak {
		s = append(s, string(p))
	}
	if cfg.StronglyTyped {
		s = append(s, string(StronglyTyped))
	}
	return strings.Join(s, ", ")
}

// UnsupportedError says that the detected TensorRT cannot express a
// candidate: a permanent failure of that candidate on that platform.
type UnsupportedError struct {
	Config  Config
	Version Version
	Reason  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s cannot be built with TensorRT %s: %s", e.Config, e.Version, e.Reason)
}

// Supported reports whether trtexec of version v can express the config,
// following the flag history in trtexec-nvml.md §1.4: tunefleet drives 8.6,
// 10.x and 11.x; --bf16 and --stronglyTyped appeared in 10.0; TensorRT 11
// removed every weak-typing flag and --calib (types come from the model,
// INT8 from Q/DQ nodes) and made strong typing the default.
func (c Config) Supported(v Version) error {
	fail := func(format string, args ...any) error {
		return &UnsupportedError{Config: c, Version: v, Reason: fmt.Sprintf(format, args...)}
	}
	if err := supportedVersion(v); err != nil {
		return fail("%v", err)
	}
	switch v.Major {
	case 8:
		if c.Has(BF16) {
			return fail("--bf16 exists from TensorRT 10.0 on")
		}
		if c.StronglyTyped {
			return fail("--stronglyTyped exists from TensorRT 10.0 on")
		}
	case 11:
		if len(c.Weak) > 0 {
			return fail("TensorRT 11 removed the weak-typing flags (--%s); the precision must be in the ONNX model (e.g. converted with ModelOpt AutoCast, or Q/DQ nodes for INT8): use trt:strongly-typed", c.Weak[0])
		}
		if c.Calib != "" {
			return fail("TensorRT 11 removed --calib")
		}
	}
	return nil
}

// supportedVersion rejects versions whose trtexec flags tunefleet has no
// source or log for.
func supportedVersion(v Version) error {
	switch {
	case v.Major == 8 && v.Minor == 6, v.Major == 10, v.Major == 11:
		return nil
	}
	return fmt.Errorf("tunefleet drives trtexec of TensorRT 8.6, 10.x and 11.x, not %d.%d", v.Major, v.Minor)
}
