package ort

import (
	"fmt"
	"strconv"

	"github.com/tunefleet/tunefleet/backend"
)

// Config is a parsed ort candidate.
type Config struct {
	Provider     string `json:"provider"` // "cpu"
	Level        string `json:"level"`    // disabled, basic, extended, all
	IntraThreads int    `json:"intra_op_threads"`
	InterThreads int    `json:"inter_op_threads"`
	Spinning     bool   `json:"spinning"`
}

// Levels are the optimization levels a candidate may name.
var Levels = []string{"disabled", "basic", "extended", "all"}

// ParseConfig interprets a candidate of this backend. Defaults: provider
// cpu, level extended (portable: ORT-specific fused ops but no
// hardware-specific layouts), one intra-op and one inter-op thread (on small
// machines more threads fight the Go runtime and lose), spinning off (so an
// idle session does not distort its neighbours' timings).
func ParseConfig(c backend.Candidate) (Config, error) {
	cfg := Config{Provider: "cpu", Level: "extended", IntraThreads: 1, InterThreads: 1}
	if c.Backend != "ort" {
		return Config{}, fmt.Errorf("candidate %q is not an ort candidate", c)
	}
	pos := c.Positionals
	if len(pos) > 0 {
		switch pos[0] {
		case "cpu":
		case "cuda", "tensorrt":
			return Config{}, fmt.Errorf("candidate %q: execution provider %q is not in this build (the ONNX Runtime library from npm is CPU-only); use ort:cpu:<level>, or trt:… for TensorRT", c, pos[0])
		default:
			return Config{}, fmt.Errorf("candidate %q: unknown execution provider %q (want cpu)", c, pos[0])
		}
	}
	if len(pos) > 1 {
		if !validLevel(pos[1]) {
			return Config{}, fmt.Errorf("candidate %q: unknown optimization level %q (want one of %v)", c, pos[1], Levels)
		}
		cfg.Level = pos[1]
	}
	if len(pos) > 2 {
		return Config{}, fmt.Errorf("candidate %q: too many parts; write ort:cpu:<level>[:threads=N][:inter=N][:spin=on]", c)
	}
	for k, v := range c.Options {
		switch k {
		case "threads", "inter":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1024 {
				return Config{}, fmt.Errorf("candidate %q: %s=%s must be a thread count (0 lets ONNX Runtime choose)", c, k, v)
			}
			if k == "threads" {
				cfg.IntraThreads = n
			} else {
				cfg.InterThreads = n
			}
		case "spin":
			switch v {
			case "on":
				cfg.Spinning = true
			case "off":
				cfg.Spinning = false
			default:
				return Config{}, fmt.Errorf("candidate %q: spin=%s must be on or off", c, v)
			}
		default:
			return Config{}, fmt.Errorf("candidate %q: unknown option %q (want threads, inter or spin)", c, k)
		}
	}
	return cfg, nil
}

func validLevel(s string) bool {
	for _, l := range Levels {
		if l == s {
			return true
		}
	}
	return false
}
