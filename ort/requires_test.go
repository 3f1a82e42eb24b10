package ort_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
)

// A real ort:cpu:all engine of a convnet, built here, holds ONNX Runtime's
// NCHWc layout operators, and the engine says so with this CPU's NCHWc
// block (16 with AVX-512F, 8 on other x86-64 CPUs); the same graph at the
// extended level holds none and says nothing.
func TestEngineRecordsHardwareSpecificOperators(t *testing.T) {
	needORT(t)
	cpu, err := gpu.DetectCPU("")
	if err != nil {
		t.Fatal(err)
	}
	wantBlock := state.NCHWcBlock(runtime.GOARCH, cpu.Flags)
	if wantBlock == 0 {
		t.Skipf("ONNX Runtime's NCHWc block on %s is not known here", runtime.GOARCH)
	}
	model := filepath.Join(t.TempDir(), "convnet.onnx")
	if err := onnxtest.ConvNet().Write(model); err != nil {
		t.Fatal(err)
	}
	g := bundle.Graph{
		Name: "0", ONNX: "convnet.onnx",
		Inputs:  []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.SpecFromRange("image", []int64{1, 3, 16, 16}, []int64{4, 3, 16, 16}, true)}},
		Outputs: []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.SpecFromRange("logits", []int64{1, 10}, []int64{4, 10}, true)}},
	}
	for _, tc := range []struct {
		cand      string
		wantOps   string
		wantBlock string
	}{
		{"ort:cpu:all", state.NCHWcDomain, strconv.Itoa(wantBlock)},
		{"ort:cpu:extended", "", ""},
		{"ort:cpu:basic", "", ""},
	} {
		t.Run(tc.cand, func(t *testing.T) {
			c, err := backend.ParseCandidate(tc.cand)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			e, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: model, Candidate: c, WorkDir: work})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			gio, err := bundle.ReadGraphIO(filepath.Join(work, ort.EngineFile))
			if err != nil {
				t.Fatal(err)
			}
			hasNCHWc := gio.NodeDomains[state.NCHWcDomain] > 0
			if hasNCHWc != (tc.wantOps != "") {
				t.Errorf("optimized model's node domains %v", gio.NodeDomains)
			}
			info := e.Info()
			if info[ort.InfoHardwareOps] != tc.wantOps || info[ort.InfoNCHWcBlock] != tc.wantBlock {
				t.Errorf("info says hardware_ops %q nchwc_block %q, want %q %q", info[ort.InfoHardwareOps], info[ort.InfoNCHWcBlock], tc.wantOps, tc.wantBlock)
			}
			log, err := os.ReadFile(filepath.Join(work, ort.LogFile))
			if err != nil {
				t.Fatal(err)
			}
			if said := strings.Contains(string(log), "hardware-specific"); said != (tc.wantOps != "") {
				t.Errorf("build log (hardware-specific said: %t):\n%s", said, log)
			}
		})
	}
}
