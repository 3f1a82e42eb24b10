package trt_test

// End to end through backend.Backend and tuner.TuneGraph, with the
// trtexec stand-in of internal/testkit/trtreplay standing in for trtexec: a real
// bundle, real fixture logs and exports, the command lines checked as the
// stand-in received them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/trt"
	"github.com/tunefleet/tunefleet/tuner"
)

// rig is one bundle, one trtexec stand-in and one backend.
type rig struct {
	t        *testing.T
	b        *bundle.Bundle
	g        bundle.Graph
	samples  []bundle.Sample
	onnx     string
	profile  shapes.Profile
	argvLog  string
	env      string // the stand-in's config entry
	cacheDir string
	be       *trt.Backend
	broken   atomic.Int32
}

const banner103 = "&&&& RUNNING TensorRT.trtexec [TensorRT v100300]"

// newRig writes a bundle (the MLP fixture: input[N,4] → output[N,3], two
// samples) and a stand-in whose run outputs are the bundle's reference outputs
// for exactly the bytes of each sample's inputs. edit adjusts the stand-in.
func newRig(t *testing.T, edit func(*trtreplay.Config)) *rig {
	t.Helper()
	r := &rig{t: t}
	dir := bundletest.Write(t)
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	r.g, _ = b.Manifest.Graph("0")
	if r.samples, err = b.Samples("0"); err != nil {
		t.Fatal(err)
	}
	if r.onnx, err = bundle.Resolve(b.Dir, r.g.ONNX); err != nil {
		t.Fatal(err)
	}
	if r.onnx, err = filepath.Abs(r.onnx); err != nil {
		t.Fatal(err)
	}
	if r.profile, err = shapes.DeriveProfile(bundle.Specs(r.g.Inputs), nil); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	r.argvLog = filepath.Join(tmp, "argv.jsonl")
	r.cacheDir = filepath.Join(tmp, "timing-caches")
	cfg := trtreplay.Working(t, trtreplay.GraphOutputs(t, r.g, r.b.Manifest.DynamicShapes, r.samples))
	cfg.ArgvLog = r.argvLog
	if edit != nil {
		edit(&cfg)
	}
	env := trtreplay.WriteConfig(t, cfg)
	r.env = env
	r.be = trt.New(trt.Options{
		Executable: trtreplay.Executable(t), Env: []string{env}, Platform: "nvidia-rtx-a5000/cc8.6/trt10.3.0",
		TimingCacheDir: r.cacheDir,
		OnBrokenWorker: func(error) { r.broken.Add(1) },
	})
	return r
}

func (r *rig) request(cand, work string) backend.BuildRequest {
	return backend.BuildRequest{Model: r.b.Manifest.Model, Graph: r.g, ONNXPath: r.onnx, Profile: r.profile, Candidate: mustCandidate(r.t, cand), WorkDir: work}
}

// argv returns what the stand-in received, without the run-specific parts.
func (r *rig) argv() [][]string {
	var out [][]string
	if _, err := os.Stat(r.argvLog); err != nil {
		return nil
	}
	for _, a := range trtreplay.ReadArgv(r.t, r.argvLog) {
		out = append(out, a.Args)
	}
	return out
}

// meanLatencyMs is the mean of the first n latencies of the times fixture,
// read with encoding/json alone.
func meanLatencyMs(tb testing.TB, n int) float64 {
	raw := strictTimes(tb)
	s := 0.0
	for _, q := range raw[:n] {
		s += float64(time.Duration(q["latencyMs"] * float64(time.Millisecond)))
	}
	return s / float64(n) / float64(time.Millisecond)
}

// TestBackendEndToEnd drives one trt candidate through backend.Backend:
// Build, Run on every recorded sample with backend.Check against the
// reference outputs, Benchmark; then a second build that reuses the
// platform's timing cache.
func TestBackendEndToEnd(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	work := filepath.Join(t.TempDir(), "work")
	eng, err := r.be.Build(ctx, r.request("trt:fp16:opt=2:workspace=256", work))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	// The command lines the stand-in received: version detection, then the
	// build, exactly.
	calls := r.argv()
	if len(calls) != 2 || !reflect.DeepEqual(calls[0], []string{"--help"}) {
		t.Fatalf("calls = %q", calls)
	}
	wantBuild := []string{
		"--onnx=" + r.onnx, "--saveEngine=model.plan",
		"--minShapes=input:1x4", "--optShapes=input:8x4", "--maxShapes=input:8x4",
		"--fp16", "--memPoolSize=workspace:256", "--builderOptimizationLevel=2",
		"--timingCacheFile=cache/timing.cache", "--profilingVerbosity=detailed", "--exportLayerInfo=layers.json",
		"--skipInference",
	}
	if !reflect.DeepEqual(calls[1], wantBuild) {
		t.Errorf("build argv =\n  %q\nwant\n  %q", calls[1], wantBuild)
	}
	if d := trtreplay.ReadArgv(t, r.argvLog)[1].Dir; d != work {
		t.Errorf("trtexec ran in %s, want the work directory %s", d, work)
	}

	// What the build log and the plan say.
	info := eng.Info()
	for k, v := range map[string]string{
		"trt_version": "10.3.0", "device": "NVIDIA RTX A5000", "compute_capability": "8.6", "gpu_memory_mib": "24238",
		"device_uuid": "GPU-bd38339f-9e6e-7f34-17ad-c1123627120b", "plan_version": "10.3.0.26", "precision": "FP32+FP16",
		"engine_built_s": "48.0138", "config": "trt:fp16:opt=2:workspace=256", "timing_cache": "miss", "timing_cache_store": "ok",
		"platform": "nvidia-rtx-a5000/cc8.6/trt10.3.0",
	} {
		if info[k] != v {
			t.Errorf("Info[%s] = %q, want %q", k, info[k], v)
		}
	}
	// The stored log blob is trtexec's output, byte for byte.
	arts := eng.Artifacts()
	if len(arts) != 3 || arts[0].Role != "engine" || arts[1].Role != "log" || arts[2].Role != trt.RoleLayers {
		t.Fatalf("artifacts = %+v", arts)
	}
	if got, _ := os.ReadFile(arts[1].Path); !bytes.Equal(got, readFixture(t, fxTRT103)) {
		t.Error("the build log artifact is not the replayed trtexec output")
	}
	if _, err := trt.ReadLayerInfo(arts[2].Path); err != nil {
		t.Error(err)
	}

	// Every sample: raw inputs in, exported outputs back, the same check as
	// for ONNX Runtime.
	for i, s := range r.samples {
		got, err := eng.Run(ctx, s.Inputs, backend.OutputSpecsLike(s.Outputs))
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if err := backend.Check(got, s.Outputs, r.g.Tolerances); err != nil {
			t.Errorf("sample %d: %v", i, err)
		}
	}
	calls = r.argv()
	wantRun := []string{"--loadEngine=model.plan", "--shapes=input:4x4", "--loadInputs=input:run-2/0.bin",
		"--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput=run-2/outputs.json"}
	if len(calls) != 4 || !reflect.DeepEqual(calls[3], wantRun) {
		t.Errorf("second run argv = %q, want %q", calls[len(calls)-1], wantRun)
	}

	// The benchmark: statistics from the exported trace, cut by the stop
	// rule (the steady RTX 3090 trace is stable at MinSamples).
	rule := backend.DefaultStopRule()
	st, err := eng.Benchmark(ctx, 1, r.samples[0].Inputs, backend.OutputSpecsLike(r.samples[0].Outputs), rule)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 100 || st.StopReason != backend.StopStable || !st.Stable || st.BatchSize != 1 ||
		math.Abs(st.MeanMs-meanLatencyMs(t, 100)) > 1e-9 || st.MinMs < 12.0986 || st.MaxMs > 13.0181 {
		t.Errorf("stats = %+v (mean want %v)", st, meanLatencyMs(t, 100))
	}
	calls = r.argv()
	wantBench := []string{"--loadEngine=model.plan", "--shapes=input:1x4", "--loadInputs=input:bench-3-bs1/0.bin",
		"--noDataTransfers", "--useCudaGraph", "--useSpinWait", "--warmUp=500", "--duration=2", "--iterations=100", "--exportTimes=bench-3-bs1/times.json"}
	if !reflect.DeepEqual(calls[len(calls)-1], wantBench) {
		t.Errorf("bench argv = %q, want %q", calls[len(calls)-1], wantBench)
	}
	arts = eng.Artifacts()
	if last := arts[len(arts)-1]; last.Role != trt.RoleBenchmarkLog || filepath.Base(last.Path) != "bench-3-bs1.log" {
		t.Errorf("artifacts = %+v", arts)
	}
	// Nothing else is left in the work directory: inputs, outputs and
	// times are removed, successful run logs too.
	entries, _ := os.ReadDir(work)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"bench-3-bs1.log", "build.log", "cache", "layers.json", "model.plan"}; !reflect.DeepEqual(names, want) {
		t.Errorf("work directory holds %v, want %v", names, want)
	}

	// A second build on this platform starts from the stored cache, and
	// the version is not detected again.
	eng2, err := r.be.Build(ctx, r.request("trt:fp16", filepath.Join(t.TempDir(), "work2")))
	if err != nil {
		t.Fatal(err)
	}
	if eng2.Info()["timing_cache"] != "hit" {
		t.Errorf("second build: timing_cache = %q", eng2.Info()["timing_cache"])
	}
	helps := 0
	for _, c := range r.argv() {
		if c[0] == "--help" {
			helps++
		}
	}
	if helps != 1 {
		t.Errorf("--help ran %d times, want 1", helps)
	}
	stored, err := os.ReadFile(filepath.Join(r.cacheDir, "nvidia-rtx-a5000%2Fcc8.6%2Ftrt10.3.0", "trtexec-10.3.0-tf32.cache"))
	if err != nil || string(stored) != "timing;timing;" {
		t.Errorf("stored cache %q, %v: want both builds' entries", stored, err)
	}
	// A noTF32 candidate does not share the TF32 cache.
	eng3, err := r.be.Build(ctx, r.request("trt:fp16:noTF32", filepath.Join(t.TempDir(), "work3")))
	if err != nil {
		t.Fatal(err)
	}
	if eng3.Info()["timing_cache"] != "miss" {
		t.Errorf("noTF32 build: timing_cache = %q", eng3.Info()["timing_cache"])
	}
	if r.broken.Load() != 0 || r.be.Broken() != nil {
		t.Error("a healthy run marked the worker broken")
	}
}

// TestTuneGraphWithTRT runs a trt candidate through tuner.TuneGraph, as the
// worker does, and checks result.json: passed, both samples checked, a
// benchmark per batch size from the exported trace, the log blob.
func TestTuneGraphWithTRT(t *testing.T) {
	r := newRig(t, nil)
	strat, err := strategy.Parse(strategy.MaxThroughput, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var progress bytes.Buffer
	res, err := tuner.TuneGraph(context.Background(), r.b, "0", out, tuner.Options{
		Backends: backend.Registry{"trt": r.be}, Strategy: strat,
		Candidates: []backend.Candidate{mustCandidate(t, "trt:fp16:opt=3")}, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Winner.Candidate != "trt:fp16:opt=3" {
		t.Fatalf("no winner: %+v\n%s", res.Failure, progress.String())
	}
	cr := res.Results[0]
	if cr.Status != backend.StatusPassed || cr.CheckedAt != 2 || cr.Info["trt_version"] != "10.3.0" || cr.Info["device"] != "NVIDIA RTX A5000" {
		t.Fatalf("result = %+v", cr)
	}
	var sizes []int
	for _, st := range cr.Benchmarks {
		sizes = append(sizes, st.BatchSize)
		if st.Samples != 100 || math.Abs(st.MeanMs-meanLatencyMs(t, 100)) > 1e-9 || math.Abs(st.Throughput-float64(st.BatchSize)*1000/st.EstimateMs) > 1e-9 {
			t.Errorf("batch %d: %+v", st.BatchSize, st)
		}
	}
	if !reflect.DeepEqual(sizes, []int{1, 2, 4, 8}) {
		t.Errorf("batch sizes %v, want 1, 2, 4, 8", sizes)
	}
	// The stand-in checked every --loadInputs file's size against --shapes;
	// here the shapes themselves.
	var benchShapes []string
	for _, c := range r.argv() {
		if strings.HasPrefix(c[len(c)-1], "--exportTimes=") {
			benchShapes = append(benchShapes, c[1])
		}
	}
	if !reflect.DeepEqual(benchShapes, []string{"--shapes=input:1x4", "--shapes=input:2x4", "--shapes=input:4x4", "--shapes=input:8x4"}) {
		t.Errorf("benchmark shapes %q", benchShapes)
	}
	roles := map[string]int{}
	for _, a := range cr.Artifacts {
		roles[a.Role]++
		if a.Role == "log" {
			// build.log is trtexec's output as it printed it, then the
			// correctness check's verdict per sample (issue 18).
			got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(a.Path)))
			if err != nil || !bytes.HasPrefix(got, readFixture(t, fxTRT103)) {
				t.Errorf("log blob %s: %v, does not start with trtexec's output (the fixture)", a.Path, err)
			}
			rest := string(got[min(len(got), len(readFixture(t, fxTRT103))):])
			for _, want := range []string{"tunefleet: check sample ", `max abs error per output: "output"=`, "tunefleet: check of trt:fp16:opt=3: passed on 2 sample(s)"} {
				if !strings.Contains(rest, want) {
					t.Errorf("log blob %s lacks %q after trtexec's output:\n%s", a.Path, want, rest)
				}
			}
		}
	}
	if !reflect.DeepEqual(roles, map[string]int{"engine": 1, "log": 1, trt.RoleLayers: 1, trt.RoleBenchmarkLog: 4}) {
		t.Errorf("artifact roles %v", roles)
	}
	if res.Winner.Engine == nil || res.Winner.Engine.Size != 64 {
		t.Errorf("winner engine %+v", res.Winner.Engine)
	}
	stored, err := tuner.ReadResult(filepath.Join(out, tuner.ResultFile))
	if err != nil || !stored.OK() || len(stored.Results[0].Benchmarks) != 4 {
		t.Errorf("result.json: %+v, %v", stored, err)
	}
}

// TestFailurePath replays the FAILED fixture for the build: a clear,
// permanent build failure of the candidate with the log kept, not a crash.
func TestFailurePath(t *testing.T) {
	r := newRig(t, func(c *trtreplay.Config) {
		c.Banner = "&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72]"
		c.Build = trtreplay.Replay{Log: fixture(t, fxPluginFail), Exit: 1}
	})
	_, err := r.be.Build(context.Background(), r.request("trt:fp16", filepath.Join(t.TempDir(), "w")))
	var te *trt.Error
	if backend.ClassOf(err, "") != backend.FailBuild || !errors.As(err, &te) {
		t.Fatalf("Build error = %v", err)
	}
	if te.Classification.Kind != trt.KindPluginNotFound || te.Classification.Op != "AddScalar" || te.Classification.Retryable || te.Exit.Code != 1 || trt.IsBrokenWorker(err) {
		t.Errorf("classification = %+v exit %+v", te.Classification, te.Exit)
	}
	for _, s := range []string{"AddScalar", "no TensorRT plugin", "build.log"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}

	// Through the tuner: a failed candidate with class build, its log in
	// the result, and no winner.
	strat, _ := strategy.Parse(strategy.FirstWins, 0)
	out := t.TempDir()
	res, err := tuner.TuneGraph(context.Background(), r.b, "0", out, tuner.Options{
		Backends: backend.Registry{"trt": r.be}, Strategy: strat, Candidates: []backend.Candidate{mustCandidate(t, "trt:fp16")},
	})
	if err != nil {
		t.Fatal(err)
	}
	cr := res.Results[0]
	if res.OK() || cr.Status != backend.StatusFailed || cr.Failure == nil || cr.Failure.Class != backend.FailBuild || !strings.Contains(cr.Failure.Message, "AddScalar") {
		t.Fatalf("result = %+v failure %+v", cr, cr.Failure)
	}
	found := false
	for _, a := range cr.Artifacts {
		if a.Role == "log" && strings.HasSuffix(a.Path, trt.BuildLogFile) {
			got, _ := os.ReadFile(filepath.Join(out, filepath.FromSlash(a.Path)))
			found = bytes.Equal(got, readFixture(t, fxPluginFail))
		}
		if strings.Contains(a.Path, "timing") {
			t.Errorf("the private timing cache copy became an artifact: %+v", a)
		}
	}
	if !found {
		t.Errorf("the failed build's log is not in the result: %+v", cr.Artifacts)
	}
	if b, _ := json.Marshal(res); !bytes.Contains(b, []byte(`"class":"build"`)) {
		t.Errorf("result JSON: %s", b)
	}
}

// TestBrokenWorker: a trtexec that sees no GPU fails the candidate as an
// infrastructure problem and marks the worker broken, once.
func TestBrokenWorker(t *testing.T) {
	noGPU := filepath.Join(t.TempDir(), "no-gpu.log")
	os.WriteFile(noGPU, []byte("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec --onnx=m.onnx\n"+
		"[08/09/2024-23:19:08] [I] === Device Information ===\n"+
		"[08/09/2024-23:19:08] [I] Cannot find any available devices (GPUs)!\n"), 0o644)
	r := newRig(t, func(c *trtreplay.Config) { c.Build = trtreplay.Replay{Log: noGPU, Exit: 1} })
	for i := 0; i < 2; i++ {
		_, err := r.be.Build(context.Background(), r.request("trt:fp16", filepath.Join(t.TempDir(), "w")))
		if backend.ClassOf(err, "") != backend.FailInfrastructure || !trt.IsBrokenWorker(err) {
			t.Fatalf("Build error = %v", err)
		}
	}
	if r.be.Broken() == nil || r.broken.Load() != 1 {
		t.Errorf("Broken() = %v, hook called %d times", r.be.Broken(), r.broken.Load())
	}
}

// TestBuildTimeout: a build that outlives its context is killed with its
// process group and fails as a timeout.
func TestBuildTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	r := newRig(t, func(c *trtreplay.Config) { c.Build = trtreplay.Replay{Hang: true, HangPIDFile: pidFile} })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := r.be.Build(ctx, r.request("trt:fp16", filepath.Join(t.TempDir(), "w")))
	if backend.ClassOf(err, "") != backend.FailTimeout {
		t.Fatalf("Build error = %v", err)
	}
	var te *trt.Error
	if !errors.As(err, &te) || te.Classification.Kind != trt.KindTimeout {
		t.Errorf("error %v", err)
	}
}

// TestUnsupportedCandidate: bf16 on TensorRT 8.6 is refused before any
// build runs, as a permanent failure.
func TestUnsupportedCandidate(t *testing.T) {
	r := newRig(t, func(c *trtreplay.Config) { c.Banner = "&&&& RUNNING TensorRT.trtexec [TensorRT v8601]" })
	_, err := r.be.Build(context.Background(), r.request("trt:bf16", filepath.Join(t.TempDir(), "w")))
	var ue *trt.UnsupportedError
	if backend.ClassOf(err, "") != backend.FailBuild || !errors.As(err, &ue) || !strings.Contains(err.Error(), "TensorRT 8.6.1") {
		t.Fatalf("Build error = %v", err)
	}
	if calls := r.argv(); len(calls) != 1 || calls[0][0] != "--help" {
		t.Errorf("calls %q: only the version should have been asked", calls)
	}
}

// TestRunFailureKeepsLog: a failed correctness run is a runtime failure
// and its log is kept as an artifact.
func TestRunFailureKeepsLog(t *testing.T) {
	r := newRig(t, func(c *trtreplay.Config) { c.Run = trtreplay.Replay{Log: fixture(t, fxTRT82Fail), Exit: 1} })
	eng, err := r.be.Build(context.Background(), r.request("trt:fp16", filepath.Join(t.TempDir(), "w")))
	if err != nil {
		t.Fatal(err)
	}
	s := r.samples[0]
	_, err = eng.Run(context.Background(), s.Inputs, backend.OutputSpecsLike(s.Outputs))
	if backend.ClassOf(err, "") != backend.FailRuntime {
		t.Fatalf("Run error = %v", err)
	}
	arts := eng.Artifacts()
	if last := arts[len(arts)-1]; last.Role != trt.RoleRunLog {
		t.Errorf("artifacts %+v", arts)
	} else if got, _ := os.ReadFile(last.Path); !bytes.Equal(got, readFixture(t, fxTRT82Fail)) {
		t.Error("the run log is not trtexec's output")
	}
}
