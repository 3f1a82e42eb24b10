package cli

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/state"
)

// targetFlags name the machine a fetch deploys to, so that it refuses an
// engine that machine cannot run (state.Requires) before writing anything.
type targetFlags struct {
	platform string // --for-platform KEY
	here     bool   // --for-this-machine
	cpuinfo  string // --for-cpuinfo FILE
	portable bool   // --portable
}

func (f *targetFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.platform, "for-platform", "", "refuse engines a machine of this platform key cannot run (e.g. cpu-intel-xeon-avx2-ort1.24.1, as worker info prints it)")
	fl.BoolVar(&f.here, "for-this-machine", false, "refuse engines this machine cannot run (its /proc/cpuinfo flags and architecture)")
	fl.StringVar(&f.cpuinfo, "for-cpuinfo", "", "refuse engines the machine whose /proc/cpuinfo was saved in FILE cannot run")
	fl.BoolVar(&f.portable, "portable", false, "refuse engines tied to the hardware that built them (for a fleet of mixed machines)")
}

// cannotRunError is a state with an engine the deploy target cannot run:
// the state is good, not for that target (exit 1, as a graph Triton
// cannot serve).
type cannotRunError struct{ msg string }

func (e *cannotRunError) Error() string { return e.msg }

// machine is the target the flags name; ok is false when they name none.
// A bad key or an unreadable cpuinfo is bad input.
func (f *targetFlags) machine() (m state.Machine, ok bool, err error) {
	n := 0
	for _, set := range []bool{f.platform != "", f.here, f.cpuinfo != "", f.portable} {
		if set {
			n++
		}
	}
	if n > 1 {
		return m, false, usageErr(fmt.Errorf("--for-platform, --for-this-machine, --for-cpuinfo and --portable name the deploy target: give one"))
	}
	switch {
	case f.platform != "":
		p, err := gpu.ParseKey(f.platform)
		if err != nil {
			// The key is the user's: echoed cut, as every echo is.
			return m, false, usageErr(fmt.Errorf("--for-platform: %s", clip.Counted(err.Error(), 2*clip.Echo)))
		}
		m = state.Machine{Name: "platform " + f.platform, Arch: p.Arch, Flags: p.Flags, ComputeCapability: p.ComputeCapability, TensorRT: p.TensorRT}
		if p.Kind == gpu.KindCPU && p.ISATier == "" {
			// A key without a tier says nothing of the CPU's extensions:
			// only what needs none runs there for sure.
			m.Flags = nil
		}
		return m, true, nil
	case f.here, f.cpuinfo != "":
		path, name := f.cpuinfo, "the machine of "+f.cpuinfo
		if f.here {
			path, name = "", "this machine"
		}
		cpu, err := gpu.DetectCPU(path)
		if err != nil {
			if f.here {
				return m, false, fmt.Errorf("--for-this-machine: read this CPU: %w", err)
			}
			return m, false, usageErr(fmt.Errorf("--for-cpuinfo: %w", err))
		}
		arch := runtime.GOARCH
		if !f.here {
			arch = archOfFlags(cpu.Flags)
		}
		return state.Machine{Name: name, Arch: arch, Flags: cpu.Flags}, true, nil
	case f.portable:
		return state.Machine{Name: "a fleet of mixed machines (--portable)"}, true, nil
	}
	return m, false, nil
}

// archOfFlags guesses a saved cpuinfo's architecture from its flags:
// arm64's Features name asimd (kept as neon), x86's do not.
func archOfFlags(flags []string) string {
	if slices.Contains(flags, "neon") {
		return "arm64"
	}
	return "amd64"
}

// canRun says which of the state's graphs the target cannot run, or nil.
func (f *targetFlags) canRun(st *state.State, m state.Machine) error {
	var why []string
	nchwc, plan := false, false
	for _, g := range st.Graphs {
		if g.Requires == nil {
			continue
		}
		err := g.Requires.CanRun(m)
		if f.portable {
			err = fmt.Errorf("its engine is tied to the hardware that built it (%s)", requiresText(g.Requires))
		}
		if err != nil {
			why = append(why, fmt.Sprintf("graph %s (won by %s): %v", g.Name, g.Candidate, err))
			nchwc = nchwc || g.Requires.NCHWcBlock > 0 || len(g.Requires.Operators) > 0
			plan = plan || g.Requires.ComputeCapability != ""
		}
	}
	if len(why) == 0 {
		return nil
	}
	var hints []string
	if !f.portable {
		hints = append(hints, "tune it on a worker of that platform and fetch that state (--platform <its key>)")
	}
	if nchwc {
		hints = append(hints, "for a fleet of mixed CPUs, submit without ort:cpu:all (ort:cpu:extended builds no layout rewrites)")
	}
	if plan && f.portable {
		hints = append(hints, "a TensorRT plan is never portable: tune on each GPU and TensorRT release the fleet serves with")
	}
	return &cannotRunError{fmt.Sprintf("run %s cannot run on %s: %s; nothing written: %s",
		st.Run, m.Name, strings.Join(why, "; "), strings.Join(hints, ", or "))}
}

// requiresText is a requirement in a few words.
func requiresText(r *state.Requires) string {
	var parts []string
	if len(r.Operators) > 0 {
		parts = append(parts, strings.Join(r.Operators, ", "))
	}
	if r.NCHWcBlock > 0 {
		parts = append(parts, fmt.Sprintf("NCHWc block %d", r.NCHWcBlock))
	}
	if len(r.ISA) > 0 {
		parts = append(parts, "needs "+strings.Join(r.ISA, ", "))
	}
	if len(r.ISAAbsent) > 0 {
		parts = append(parts, "needs a CPU without "+strings.Join(r.ISAAbsent, ", "))
	}
	if r.ComputeCapability != "" {
		parts = append(parts, "compute capability "+r.ComputeCapability)
	}
	if r.TensorRT != "" {
		parts = append(parts, "TensorRT "+r.TensorRT)
	}
	return strings.Join(parts, "; ")
}

// printRequires notes the graphs whose engines are tied to the hardware
// that built them, when the fetch was not told its target (and so checked
// none).
func printRequires(w io.Writer, requires map[string]*state.Requires, checked bool) {
	if checked {
		return
	}
	for _, g := range slices.Sorted(maps.Keys(requires)) {
		fmt.Fprintf(w, "note: graph %s's engine is tied to the hardware that built it (%s: state.json's requires); check a deploy machine with --for-this-machine or --for-platform KEY\n",
			g, requiresText(requires[g]))
	}
}
