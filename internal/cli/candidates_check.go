package cli

import (
	"fmt"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/gpu"
)

// allowTRTOnCPUFlag lets `producer submit` send trt: candidates to the cpu
// class anyway (a CPU-class worker that has TensorRT, by --class).
const allowTRTOnCPUFlag = "allow-trt-on-cpu"

// checkCandidatesForTarget refuses trt: candidates for the cpu target
// class unless allow is set. CPU workers have no TensorRT: every such
// candidate would fail there as unavailable, which the submitter could
// have been told at once, in one message naming the flag.
func checkCandidatesForTarget(target string, cands []backend.Candidate, allow bool) error {
	if target != gpu.ClassCPU || allow {
		return nil
	}
	var trt []string
	for _, c := range cands {
		if c.Backend == "trt" {
			trt = append(trt, c.String())
		}
	}
	if len(trt) == 0 {
		return nil
	}
	return fmt.Errorf("--target cpu: candidate(s) %s need TensorRT, which cpu workers do not have: drop them, submit to a GPU class (e.g. --target gpu.h100), or give --%s if your cpu workers do have TensorRT",
		strings.Join(trt, ", "), allowTRTOnCPUFlag)
}
