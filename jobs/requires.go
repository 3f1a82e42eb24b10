package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/tuner"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/state"
)

// engineRequires is what a machine needs to run a winner's engine (nil:
// any machine of the platform's kind), from what its backend reported
// (info) and the platform key it was built on. An ONNX Runtime engine is
// tied to the CPU when its optimized model holds layout operators
// (ort.InfoHardwareOps, with the NCHWc block of the CPU that built it); a
// TensorRT plan always is, to its GPU's compute capability and TensorRT
// version.
func engineRequires(candidate string, info map[string]string, platform string) *state.Requires {
	switch {
	case strings.HasPrefix(candidate, "ort:"):
		ops := info[ort.InfoHardwareOps]
		if ops == "" {
			return nil
		}
		block, _ := strconv.Atoi(info[ort.InfoNCHWcBlock])
		return state.NCHWcRequires(strings.Split(ops, ","), info["goarch"], block)
	case strings.HasPrefix(candidate, "trt:"):
		r := &state.Requires{}
		for _, key := range []string{platform, info["platform"]} {
			if p, err := gpu.ParseKey(key); err == nil && p.Kind == gpu.KindGPU {
				r.ComputeCapability, r.TensorRT = p.ComputeCapability, p.TensorRT
				break
			}
		}
		if v := info["trt_version"]; v != "" {
			r.TensorRT = majorMinorPatch(v)
		}
		if r.ComputeCapability == "" && r.TensorRT == "" {
			return nil
		}
		return r
	}
	return nil
}

// majorMinorPatch cuts a version to its first three parts ("10.3.0.26" →
// "10.3.0"): a plan runs with the TensorRT release that built it, whatever
// the build number.
func majorMinorPatch(v string) string {
	parts := strings.SplitN(v, ".", 4)
	return strings.Join(parts[:min(3, len(parts))], ".")
}

// resultRequires is what a good result's winner requires, for the result
// to carry (tuner.Result.Requires; {} for none): what it recorded, else
// what its backend reported (engineRequires). A result taken from the
// index before requirements were recorded may hold neither (its engine
// was built before ONNX Runtime engines reported their layout
// operators): its engine is read, as the worker that built it would have,
// for NCHWc operators, with the block of the CPU the platform key names
// (the platform the engine was built and reused on).
func resultRequires(ctx context.Context, store artifacts.Store, res *tuner.Result, platform string) (*state.Requires, error) {
	if res.Requires != nil || !res.OK() {
		return res.Requires, nil
	}
	sel := res.Winner.Selection
	var info map[string]string
	if sel.Index >= 0 && sel.Index < len(res.Results) {
		info = res.Results[sel.Index].Info
	}
	r := engineRequires(sel.Candidate, info, platform)
	if _, reported := info[ort.InfoHardwareOps]; res.Reused && r == nil && strings.HasPrefix(sel.Candidate, "ort:") && !reported && res.Winner.Engine != nil {
		var err error
		if r, err = engineNCHWc(ctx, store, res.Winner.Engine.SHA256, res.Winner.Engine.Size, platform); err != nil {
			return nil, fmt.Errorf("what the reused engine of graph %s requires: %w", res.Graph, err)
		}
	}
	if r == nil {
		r = &state.Requires{}
	}
	return r, nil
}

// engineNCHWc reads an ONNX engine from the store for ONNX Runtime's
// NCHWc layout operators (ort's hardwareOps rule): nil when it has none.
func engineNCHWc(ctx context.Context, store artifacts.Store, sha string, size int64, platform string) (*state.Requires, error) {
	dir, err := os.MkdirTemp("", "tunefleet-requires-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "engine.onnx")
	if err := artifacts.FetchFile(ctx, store, artifacts.Ref{SHA256: sha, Size: size}, p); err != nil {
		return nil, err
	}
	gio, err := bundle.ReadGraphIO(p)
	if err != nil {
		return nil, err
	}
	if gio.NodeDomains[state.NCHWcDomain] == 0 {
		return nil, nil
	}
	arch, block := "", 0
	if k, err := gpu.ParseKey(platform); err == nil && k.Kind == gpu.KindCPU {
		arch, block = k.Arch, state.NCHWcBlock(k.Arch, k.Flags)
	}
	return state.NCHWcRequires([]string{state.NCHWcDomain}, arch, block), nil
}

// stateRequires is what state.json says a graph's engine requires: the
// result's record ({}: nothing), else what its backend reported.
func stateRequires(r *tuner.Result, candidate string, info map[string]string, platform string) *state.Requires {
	if r.Requires != nil {
		if r.Requires.Empty() {
			return nil
		}
		return r.Requires
	}
	return engineRequires(candidate, info, platform)
}
