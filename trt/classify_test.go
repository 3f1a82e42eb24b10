package trt_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/trt"
)

// TestClassifyFixtures classifies every fixture log with the exit status
// its result line implies (PASSED 0, FAILED 1), at the stage its command
// line shows and at the stages the worker uses.
func TestClassifyFixtures(t *testing.T) {
	type want struct {
		stage  trt.Stage
		ok     bool
		class  backend.FailureClass
		kind   string
		op     string
		reason string
	}
	cases := map[string][]want{
		// Build and benchmark in one run: a full result.
		fxTRT103:  {{stage: trt.StageAuto, ok: true}, {stage: trt.StageBenchmark, ok: true}, {stage: trt.StageBuild, ok: true}},
		fxTRT86:   {{stage: trt.StageAuto, ok: true}, {stage: trt.StageBenchmark, ok: true}},
		fxTRT1016: {{stage: trt.StageAuto, ok: true}},
		// PASSED, but a profiler was attached: no benchmark result, and
		// retrying will not change that.
		fxDumpProfile: {
			{stage: trt.StageAuto, class: backend.FailRuntime, kind: trt.KindNoSummary, reason: "profiler was attached"},
			{stage: trt.StageRun, ok: true},
		},
		// A custom op without its plugin: permanent, whatever the stage.
		fxPluginFail: {
			{stage: trt.StageAuto, class: backend.FailBuild, kind: trt.KindPluginNotFound, op: "AddScalar", reason: "AddScalar has no TensorRT plugin"},
			{stage: trt.StageBuild, class: backend.FailBuild, kind: trt.KindPluginNotFound, op: "AddScalar"},
		},
		// FAILED with the reason lost with stderr: decided by the exit
		// code alone, a permanent failure of the build it was in.
		fxTRT82Fail: {
			{stage: trt.StageAuto, class: backend.FailBuild, kind: trt.KindFailedNoDetail, reason: "without an error message"},
			{stage: trt.StageBuild, class: backend.FailBuild, kind: trt.KindFailedNoDetail},
		},
	}
	for _, name := range allLogs(t) {
		ws, ok := cases[name]
		if !ok {
			t.Errorf("no classification expected for fixture %s", name)
			continue
		}
		l := parseFixture(t, name)
		for _, w := range ws {
			t.Run(fmt.Sprintf("%s/%s", name, w.stage), func(t *testing.T) {
				c := trt.Classify(l, trt.InferExit(l), w.stage)
				if c.OK != w.ok || c.Class != w.class || (w.kind != "" && c.Kind != w.kind) || c.Op != w.op {
					t.Fatalf("Classify = %+v, want ok=%v class=%q kind=%q op=%q", c, w.ok, w.class, w.kind, w.op)
				}
				if !strings.Contains(c.Reason, w.reason) {
					t.Errorf("reason %q lacks %q", c.Reason, w.reason)
				}
				if c.BrokenWorker {
					t.Error("no fixture shows a broken worker")
				}
				if c.Retryable != c.Class.Retryable() {
					t.Errorf("retryable %v disagrees with class %s", c.Retryable, c.Class)
				}
				if !c.OK && len(c.Evidence) == 0 {
					t.Error("a failure without evidence")
				}
			})
		}
	}
}

// TestClassifyEvidence covers the failure texts of trtexec-nvml.md §3.1-3.2
// that no fixture log contains, one snippet each, with the exit status
// trtexec gives them.
func TestClassifyEvidence(t *testing.T) {
	const banner = "&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72] # trtexec --onnx=m.onnx --saveEngine=model.plan --skipInference\n"
	const failed = "&&&& FAILED TensorRT.trtexec [TensorRT v101600] [b72] # trtexec --onnx=m.onnx --saveEngine=model.plan --skipInference\n"
	e := func(s string) string { return "[04/25/2026-04:27:59] [E] " + s + "\n" }
	w := func(s string) string { return "[04/25/2026-04:27:59] [W] " + s + "\n" }
	i := func(s string) string { return "[04/25/2026-04:27:59] [I] " + s + "\n" }
	exit1 := trt.ExitStatus{Code: 1}
	cases := []struct {
		name   string
		log    string
		st     trt.ExitStatus
		stage  trt.Stage
		class  backend.FailureClass
		broken bool
		kind   string
		op     string
	}{
		{"unknown option (8.x flag on 10.x)", banner + "=== Model Options ===\n  --onnx\n" + e("Unknown option: --workspace 2048") + failed, exit1, trt.StageBuild, backend.FailBuild, false, trt.KindBadOption, ""},
		{"best with stronglyTyped", banner + e("--best and --stronglyTyped cannot be both set. Please remove one of them.") + failed, exit1, trt.StageBuild, backend.FailBuild, false, trt.KindBadOption, ""},
		{"no importer", banner + e("[TRT] ModelImporter.cpp:771: While parsing node number 3 [FancyOp -> \"y\"]:") + e("[TRT] ModelImporter.cpp:776: ERROR: ModelImporter.cpp:195 In function parseGraph:\n[8] No importer registered for op: FancyOp. Attempting to import as plugin.") + e("Failed to parse onnx file") + failed, exit1, trt.StageBuild, backend.FailBuild, false, trt.KindUnsupportedOp, "FancyOp"},
		{"build failure without OOM", banner + e("[TRT] 10: Could not find any implementation for node {ForeignNode[/Conv]}.") + e("Engine could not be created from network") + e("Building engine failed") + e("Failed to create engine from model or file.") + e("Engine set up failed") + failed, exit1, trt.StageBuild, backend.FailBuild, false, trt.KindBuild, ""},
		{"build failure with OOM", banner + w("[TRT] Requested amount of GPU memory (1073741824 bytes) could not be allocated. There may not be enough free memory for allocation to succeed.") + e("[TRT] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory (no further information)") + e("Engine could not be created from network") + e("Building engine failed") + failed, exit1, trt.StageBuild, backend.FailInfrastructure, false, trt.KindBuildOOM, ""},
		{"shape name", banner + e("Cannot find input tensor with name \"input\" in the network inputs! Please make sure the input tensor names are correct.") + e("Network And Config setup failed") + failed, exit1, trt.StageBuild, backend.FailBuild, false, trt.KindShape, ""},
		{"input file size", banner + e("Unexpected file size for input file: in/0.bin") + e("Inference set up failed") + failed, exit1, trt.StageRun, backend.FailRuntime, false, trt.KindShape, ""},
		{"stale engine", banner + e("[TRT] 1: [stdArchiveReader.cpp::StdArchiveReaderInitCommon::46] Error Code 1: Serialization (Serialization assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match.)") + e("Engine deserialization failed") + failed, exit1, trt.StageRun, backend.FailInfrastructure, false, trt.KindEngineMismatch, ""},
		{"runtime CUDA OOM", banner + "Cuda failure at sampleInference.cpp:123: out of memory\n", exit1, trt.StageBenchmark, backend.FailInfrastructure, false, trt.KindRuntimeOOM, ""},
		{"illegal memory access", banner + "Cuda failure at sampleInference.cpp:201: an illegal memory access was encountered\n", exit1, trt.StageBenchmark, backend.FailInfrastructure, true, trt.KindCUDAError, ""},
		{"8.6 abort on CUDA failure", banner + "Cuda failure: an illegal memory access was encountered\n", trt.ExitStatus{Code: -1, Signal: syscall.SIGABRT}, trt.StageBenchmark, backend.FailInfrastructure, true, trt.KindCUDAError, ""},
		{"no GPU (10.x exit without result line)", banner + i("=== Device Information ===") + i("Cannot find any available devices (GPUs)!"), exit1, trt.StageBuild, backend.FailInfrastructure, true, trt.KindNoDevice, ""},
		{"no CUDA device", banner + e("[TRT] CUDA initialization failure with error: 100. Please check your CUDA installation: no CUDA-capable device is detected") + failed, exit1, trt.StageBuild, backend.FailInfrastructure, true, trt.KindNoDevice, ""},
		{"old driver", banner + e("[TRT] CUDA initialization failure with error: 35. Please check your CUDA installation: CUDA driver version is insufficient for CUDA runtime version") + failed, exit1, trt.StageBuild, backend.FailInfrastructure, true, trt.KindDriver, ""},
		{"libraries missing", "trtexec: error while loading shared libraries: libnvinfer.so.10: cannot open shared object file: No such file or directory\n", trt.ExitStatus{Code: 127}, trt.StageVersion, backend.FailInfrastructure, true, trt.KindLibraryMissing, ""},
		{"exit 127 alone", "", trt.ExitStatus{Code: 127}, trt.StageBuild, backend.FailInfrastructure, true, trt.KindLibraryMissing, ""},
		{"host OOM killer", banner + i("Start parsing network model."), trt.ExitStatus{Code: -1, Signal: syscall.SIGKILL}, trt.StageBuild, backend.FailInfrastructure, false, trt.KindHostOOM, ""},
		{"segfault without CUDA error", banner + i("Start parsing network model.") + i("Finished parsing network model. Parse time: 0.1"), trt.ExitStatus{Code: -1, Signal: syscall.SIGSEGV}, trt.StageBuild, backend.FailBuild, false, trt.KindCrash, ""},
		{"watchdog", banner, trt.ExitStatus{Code: -1, Signal: syscall.SIGKILL, TimedOut: true}, trt.StageBuild, backend.FailTimeout, false, trt.KindTimeout, ""},
		{"cancelled", banner, trt.ExitStatus{Code: -1, Signal: syscall.SIGKILL, Cancelled: true}, trt.StageBuild, backend.FailInfrastructure, false, trt.KindCancelled, ""},
		{"assertion (10.x exit)", banner + e("Assertion failure: dims.nbDims > 0"), exit1, trt.StageRun, backend.FailRuntime, false, trt.KindAssertion, ""},
		{"inference failure", banner + e("Error occurred during inference") + failed, exit1, trt.StageBenchmark, backend.FailRuntime, false, trt.KindInference, ""},
		{"save failed", banner + e("Saving engine to file failed.") + failed, exit1, trt.StageBuild, backend.FailInfrastructure, false, trt.KindSaveFailed, ""},
		{"exit 1, nothing recognised, no result line", banner + i("Start parsing network model."), exit1, trt.StageBuild, backend.FailInfrastructure, false, trt.KindExitWithoutError, ""},
		{"exit 0 without PASSED", banner, trt.ExitStatus{}, trt.StageBuild, backend.FailInfrastructure, false, trt.KindNoResult, ""},
		{"PASSED without summary", banner + "&&&& PASSED TensorRT.trtexec [TensorRT v101600] [b72] # trtexec --loadEngine=model.plan\n", trt.ExitStatus{}, trt.StageBenchmark, backend.FailRuntime, false, trt.KindNoSummary, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := trt.Parse(strings.NewReader(tc.log))
			if err != nil {
				t.Fatal(err)
			}
			c := trt.Classify(l, tc.st, tc.stage)
			if c.OK || c.Class != tc.class || c.BrokenWorker != tc.broken || c.Kind != tc.kind || c.Op != tc.op {
				t.Errorf("Classify = %+v\nwant class=%s broken=%v kind=%s op=%q", c, tc.class, tc.broken, tc.kind, tc.op)
			}
			if c.Retryable != tc.class.Retryable() {
				t.Errorf("retryable = %v for class %s", c.Retryable, tc.class)
			}
		})
	}
}

// TestOOMWarningsDoNotFailABuild: builder memory warnings are not fatal by
// themselves (§2.8); a PASSED build with them is a success.
func TestOOMWarningsDoNotFailABuild(t *testing.T) {
	log := "&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72] # trtexec --onnx=m.onnx --skipInference\n" +
		"[04/25/2026-04:27:59] [W] [TRT] Requested amount of GPU memory (1073741824 bytes) could not be allocated. There may not be enough free memory for allocation to succeed.\n" +
		"[04/25/2026-04:27:59] [W] [TRT] Skipping tactic 3 due to insufficient memory on requested size of 1073741824 detected for tactic 0x0.\n" +
		"[04/25/2026-04:27:59] [I] Skipped inference phase since --skipInference is added.\n" +
		"&&&& PASSED TensorRT.trtexec [TensorRT v101600] [b72] # trtexec --onnx=m.onnx --skipInference\n"
	l, _ := trt.Parse(strings.NewReader(log))
	if c := trt.Classify(l, trt.ExitStatus{}, trt.StageAuto); !c.OK {
		t.Errorf("Classify = %+v, want ok", c)
	}
	if !l.HasWarning(trt.WarnMemory) || !l.Milestones.InferenceSkipped {
		t.Errorf("warnings %+v milestones %+v", l.Warnings, l.Milestones)
	}
}

func TestInferStage(t *testing.T) {
	for cmd, want := range map[string]trt.Stage{
		"trtexec --onnx=m.onnx --saveEngine=e --skipInference":               trt.StageBuild,
		"trtexec --onnx=m.onnx --saveEngine=e":                               trt.StageBenchmark,
		"trtexec --loadEngine=e --exportOutput=o.json --loadInputs=x:in.bin": trt.StageRun,
		"trtexec --loadEngine=e --exportTimes=t.json":                        trt.StageBenchmark,
		"trtexec --help": trt.StageVersion,
	} {
		if got := trt.InferStage(&trt.Log{Running: true, Command: cmd}); got != want {
			t.Errorf("InferStage(%q) = %s, want %s", cmd, got, want)
		}
	}
}

func TestErrorMessageAndBrokenWorker(t *testing.T) {
	e := &trt.Error{Stage: trt.StageBuild, Exit: trt.ExitStatus{Code: 1}, LogPath: "/work/x/build.log",
		Classification: trt.Classification{Class: backend.FailInfrastructure, Retryable: true, BrokenWorker: true, Kind: trt.KindNoDevice, Reason: "trtexec sees no usable GPU", Evidence: []string{"Cannot find any available devices (GPUs)!"}}}
	wrapped := fmt.Errorf("candidate trt:fp16: %w", backend.Fail(backend.FailInfrastructure, "build", e))
	if !trt.IsBrokenWorker(wrapped) {
		t.Error("IsBrokenWorker does not see through the wrapping")
	}
	if trt.IsBrokenWorker(errors.New("other")) {
		t.Error("IsBrokenWorker(other)")
	}
	msg := wrapped.Error()
	for _, s := range []string{"no-device", "no usable GPU", "Cannot find any available devices", "exit status 1", "build.log"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q lacks %q", msg, s)
		}
	}
}
