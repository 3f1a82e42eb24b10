package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/trt"
	"github.com/tunefleet/tunefleet/tuner"
)

// The trt: candidate through the queue: a worker process whose trtexec is
// this test binary acting as the stand-in of internal/testkit/trtreplay (it replays
// fixture logs and export files; it is never TensorRT), real Redis and S3,
// the producer's submit as a user runs it.

const banner103 = "&&&& RUNNING TensorRT.trtexec [TensorRT v100300]"

// trtBundle writes a one-graph MLP bundle (input[N,4] → output[N,3], batch
// 1..8, samples of batch 1 and 4 unless opts say otherwise) and returns it opened, with its graph,
// samples and the digest of its ONNX file.
func trtBundle(t *testing.T, model string, opts ...bundletest.Option) (*bundle.Bundle, []bundle.Sample, string) {
	t.Helper()
	b, err := bundle.Open(bundletest.Write(t, append([]bundletest.Option{bundletest.WithModel(model)}, opts...)...))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := b.Samples("0")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := b.Manifest.Graph("0")
	onnx, err := bundle.Resolve(b.Dir, g.ONNX)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(onnx)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return b, samples, hex.EncodeToString(sum[:])
}

// workingTRT is a stand-in config of a TensorRT 10.3 trtexec that builds,
// answers the samples' reference outputs and benchmarks with the RTX 3090
// timings.
func workingTRT(t *testing.T, b *bundle.Bundle, samples []bundle.Sample) trtreplay.Config {
	return tstack.WorkingTRT(t, b, samples)
}

// nonHelp returns the recorded invocations other than version detection
// (--help), and how many of those there were.
func nonHelp(calls []trtreplay.Argv) ([]trtreplay.Argv, int) {
	var out []trtreplay.Argv
	helps := 0
	for _, c := range calls {
		if reflect.DeepEqual(c.Args, []string{"--help"}) {
			helps++
			continue
		}
		out = append(out, c)
	}
	return out, helps
}

// meanFirstLatenciesMs is the mean of the first n latencyMs of the times
// fixture, read with encoding/json alone (each latency as a Duration, as a
// measurement is kept).
func meanFirstLatenciesMs(t *testing.T, n int) float64 {
	t.Helper()
	var raw []map[string]float64
	if err := json.Unmarshal(trtreplay.ReadFixture(t, trtreplay.TimesRTX3090), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) < n {
		t.Fatalf("times fixture has %d records, want at least %d", len(raw), n)
	}
	s := 0.0
	for _, q := range raw[:n] {
		s += float64(time.Duration(q["latencyMs"] * float64(time.Millisecond)))
	}
	return s / float64(n) / float64(time.Millisecond)
}

// fetchBlob fetches a result's artifact from the store by its digest.
func fetchBlob(t *testing.T, store artifacts.Store, a backend.FileRef) []byte {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "blob")
	if err := artifacts.FetchFile(context.Background(), store, artifacts.Ref{SHA256: a.SHA256, Size: a.Size}, dest); err != nil {
		t.Fatalf("artifact %s (%s): %v", a.Path, a.Role, err)
	}
	b, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func getObject(t *testing.T, store artifacts.Store, key string) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTRTCandidateThroughTheWorker submits a trt:fp16 candidate to a worker
// process started with --trtexec pointing at the stand-in, then a second
// run whose build replays a real failed build. It checks the command lines
// trtexec received, the result the worker stored (parsed from the replayed
// log and exports), the log blobs in S3, the engine in state.json, and that
// the failed build is a permanent failure that is archived, not retried.
func TestTRTCandidateThroughTheWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	ctx := context.Background()
	store := openStore(t, s)

	const model = "e2e.TRT"
	b, samples, onnxSum := trtBundle(t, model)
	tmp := t.TempDir()
	argvLog := filepath.Join(tmp, "argv.jsonl")
	cfgPath := filepath.Join(tmp, "trtreplay.json")
	cfg := workingTRT(t, b, samples)
	cfg.ArgvLog = argvLog
	if err := trtreplay.WriteConfigFile(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	w := startWorkerEnv(t, s, []string{workerTRTEnv + "=" + cfgPath}, "--trtexec", trtreplay.Executable(t))

	code, so, errs := submit(t, s, b.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s", "--wait")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	st := so.Runs[0]
	if st.Status != runstate.RunDone || st.Graphs["0"].Winner != "trt:fp16" || st.Graphs["0"].Attempts != 1 || st.Finalizations != 1 {
		t.Fatalf("run %+v", st)
	}

	// The result the worker stored.
	var res tuner.Result
	if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(st.Run, "0"), &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Winner.Candidate != "trt:fp16" || len(res.Results) != 1 || !strings.HasPrefix(res.Platform, "cpu-") || res.Worker == "" {
		t.Fatalf("result: winner %+v, %d candidate result(s), platform %q, worker %q", res.Winner, len(res.Results), res.Platform, res.Worker)
	}
	in, ok := res.Profile.Input("input")
	if len(res.Profile.Inputs) != 1 || !ok {
		t.Fatalf("profile %+v", res.Profile)
	}

	// (a) The command lines the stand-in received, in order: version
	// detection (the worker's fingerprint and the backend), the build, a
	// correctness run per sample, a benchmark per batch size.
	all := trtreplay.ReadArgv(t, argvLog)
	calls, helps := nonHelp(all)
	if helps != 2 || !reflect.DeepEqual(all[0].Args, []string{"--help"}) {
		t.Errorf("--help ran %d times (first call %q), want twice: the fingerprint, then the backend once", helps, all[0].Args)
	}
	// A run per recorded sample (batch 1 and 4), one at the graph's declared
	// max batch (8; its min, 1, is a sample's), then the benchmarks.
	if len(calls) != 1+len(samples)+1+4 {
		t.Fatalf("%d invocations besides --help, want a build, %d sample runs, a run at the max batch and 4 benchmarks: %q", len(calls), len(samples), calls)
	}
	build := calls[0]
	onnx := strings.TrimPrefix(build.Args[0], "--onnx=")
	if !strings.HasPrefix(build.Args[0], "--onnx=") || !filepath.IsAbs(onnx) || !strings.HasSuffix(filepath.ToSlash(onnx), "/bundle/"+bundletest.ONNXPath("0")) {
		t.Errorf("build --onnx %q: want the absolute path of the graph's model in the task's bundle", build.Args[0])
	}
	if build.ONNXSHA256 != onnxSum {
		t.Errorf("the model trtexec got has digest %s, the bundle's is %s", build.ONNXSHA256, onnxSum)
	}
	// The shapes from the profile the worker derived and recorded.
	profArgs := []string{
		"--minShapes=input:" + shapes.FormatShape(in.Min),
		"--optShapes=input:" + shapes.FormatShape(in.Opt),
		"--maxShapes=input:" + shapes.FormatShape(in.Max),
	}
	if want := []string{"--minShapes=input:1x4", "--optShapes=input:8x4", "--maxShapes=input:8x4"}; !reflect.DeepEqual(profArgs, want) {
		t.Errorf("profile args %q, want %q", profArgs, want)
	}
	wantBuild := append(append([]string{build.Args[0], "--saveEngine=model.plan"}, profArgs...),
		"--fp16", "--timingCacheFile=cache/timing.cache", "--profilingVerbosity=detailed", "--exportLayerInfo=layers.json", "--skipInference")
	if !reflect.DeepEqual(build.Args, wantBuild) {
		t.Errorf("build argv\n  %q\nwant\n  %q", build.Args, wantBuild)
	}
	// Everything ran in one work directory of the task, next to the
	// task's bundle, and the task's directory is gone now.
	taskDir := filepath.Dir(filepath.Dir(filepath.Dir(onnx)))
	for _, c := range calls {
		if c.Dir != build.Dir || !strings.HasPrefix(c.Dir, taskDir+string(filepath.Separator)) {
			t.Errorf("%q ran in %s, want the build's work directory %s under the task directory %s", c.Args, c.Dir, build.Dir, taskDir)
		}
	}
	if _, err := os.Stat(taskDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("task directory %s left behind: %v", taskDir, err)
	}
	wantRuns := [][]string{
		{"--loadEngine=model.plan", "--shapes=input:1x4", "--loadInputs=input:run-1/0.bin", "--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput=run-1/outputs.json"},
		{"--loadEngine=model.plan", "--shapes=input:4x4", "--loadInputs=input:run-2/0.bin", "--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput=run-2/outputs.json"},
		{"--loadEngine=model.plan", "--shapes=input:8x4", "--loadInputs=input:run-3/0.bin", "--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput=run-3/outputs.json"},
	}
	for i, want := range wantRuns {
		if got := calls[1+i].Args; !reflect.DeepEqual(got, want) {
			t.Errorf("run %d argv\n  %q\nwant\n  %q", i+1, got, want)
		}
	}
	for i, bs := range []int{1, 2, 4, 8} {
		n := 4 + i
		want := []string{"--loadEngine=model.plan", fmt.Sprintf("--shapes=input:%dx4", bs), fmt.Sprintf("--loadInputs=input:bench-%d-bs%d/0.bin", n, bs),
			"--noDataTransfers", "--useCudaGraph", "--useSpinWait", "--warmUp=500", "--duration=2", "--iterations=100", fmt.Sprintf("--exportTimes=bench-%d-bs%d/times.json", n, bs)}
		if got := calls[1+len(samples)+1+i].Args; !reflect.DeepEqual(got, want) {
			t.Errorf("benchmark of batch %d argv\n  %q\nwant\n  %q", bs, got, want)
		}
	}

	// (b) What the worker made of the replayed log and exports.
	cr := res.Results[0]
	if cr.Candidate != "trt:fp16" || cr.Status != backend.StatusPassed || cr.Failure != nil || cr.CheckedAt != len(samples) {
		t.Errorf("candidate result: %s %s, failure %+v, %d sample(s) checked", cr.Candidate, cr.Status, cr.Failure, cr.CheckedAt)
	}
	for k, v := range map[string]string{
		"trt_version": "10.3.0", "device": "NVIDIA RTX A5000", "compute_capability": "8.6", "gpu_memory_mib": "24238",
		"device_uuid": "GPU-bd38339f-9e6e-7f34-17ad-c1123627120b", "plan_version": "10.3.0.26", "precision": "FP32+FP16",
		"engine_built_s": "48.0138", "config": "trt:fp16", "timing_cache": "miss", "timing_cache_store": "ok", "platform": res.Platform,
	} {
		if cr.Info[k] != v {
			t.Errorf("Info[%s] = %q, want %q", k, cr.Info[k], v)
		}
	}
	mean := meanFirstLatenciesMs(t, 100)
	var sizes []int
	for _, bm := range cr.Benchmarks {
		sizes = append(sizes, bm.BatchSize)
		// The steady RTX 3090 trace is stable at the stop rule's 100 samples;
		// throughput is from the estimate the decision uses (outliers dropped).
		if bm.Samples != 100 || bm.StopReason != backend.StopStable || !bm.Stable || math.Abs(bm.MeanMs-mean) > 1e-9 ||
			bm.MinMs < 12.0986 || bm.MaxMs > 13.0181 || math.Abs(bm.Throughput-float64(bm.BatchSize)*1000/bm.EstimateMs) > 1e-9 {
			t.Errorf("benchmark of batch %d: %+v (mean want %v)", bm.BatchSize, bm, mean)
		}
	}
	if !reflect.DeepEqual(sizes, []int{1, 2, 4, 8}) {
		t.Errorf("benchmarked batch sizes %v, want 1, 2, 4, 8", sizes)
	}
	if res.Winner.Reason == "" || res.Winner.Engine == nil || res.Strategy != strategy.FirstWins {
		t.Errorf("winner %+v, strategy %q", res.Winner, res.Strategy)
	}

	// (c) The blobs in S3: the build log is trtexec's output (stdout and
	// stderr as the runner wrote them: the replayed fixture, byte for
	// byte) followed by the check's lines; the benchmark logs are the
	// replayed fixture; the layer export is the fixture's.
	roles := map[string]int{}
	for _, a := range cr.Artifacts {
		roles[a.Role]++
		got := fetchBlob(t, store, a)
		switch a.Role {
		case "log":
			// trtexec's output, then the correctness check's verdict.
			if filepath.Base(a.Path) != trt.BuildLogFile || !bytes.HasPrefix(got, trtreplay.ReadFixture(t, trtreplay.LogTRT103)) ||
				!bytes.Contains(got, []byte("tunefleet: check of "+cr.Candidate+": passed")) {
				t.Errorf("log blob %s (%s): not the replayed build log followed by the check's verdict", a.Path, a.SHA256)
			}
		case trt.RoleBenchmarkLog:
			if !bytes.Equal(got, trtreplay.ReadFixture(t, trtreplay.LogTRT103)) {
				t.Errorf("benchmark log blob %s: not the replayed log", a.Path)
			}
		case trt.RoleLayers:
			if !bytes.Equal(got, trtreplay.ReadFixture(t, trtreplay.LayersTRT1016)) {
				t.Errorf("layer info blob %s: not the exported file", a.Path)
			}
		case "engine":
			if !bytes.Equal(got, trtreplay.Plan(cfg)) {
				t.Errorf("engine blob %s: not the plan trtexec saved", a.Path)
			}
		}
	}
	if want := map[string]int{"engine": 1, "log": 1, trt.RoleLayers: 1, trt.RoleBenchmarkLog: 4}; !reflect.DeepEqual(roles, want) {
		t.Errorf("artifact roles %v, want %v", roles, want)
	}
	// The module state's engine is the plan the stand-in saved, and the
	// platform's timing cache went to the store.
	state, _, err := artifacts.ReadState(ctx, store, model, s.queue, "")
	if err != nil {
		t.Fatal(err)
	}
	if state.Run != st.Run || state.Platform != res.Platform || len(state.Graphs) != 1 || state.Graphs[0].Engine == nil || state.Graphs[0].Candidate != "trt:fp16" {
		t.Fatalf("state %+v", state)
	}
	plan := trtreplay.Plan(cfg)
	planSum := sha256.Sum256(plan)
	eng := state.Graphs[0].Engine
	if got := getObject(t, store, eng.Key); !bytes.Equal(got, plan) || eng.Size != trtreplay.PlanSize || eng.SHA256 != hex.EncodeToString(planSum[:]) {
		t.Errorf("state engine %+v: %d bytes, not the fake plan", eng, len(got))
	}
	if got := getObject(t, store, artifacts.TimingCacheKey(res.Platform, "trtexec-10.3.0-tf32.cache")); string(got) != "timing;" {
		t.Errorf("stored timing cache %q", got)
	}

	// (d) The failure path: the same worker, a second run whose build
	// replays a real failed build, exit 1. Its samples differ, so it is new
	// work (the same graph and samples would reuse the result above).
	cfg.Build = trtreplay.Replay{Log: trtreplay.Fixture(t, trtreplay.LogPluginNotFound), Exit: 1}
	cfg.ArgvLog = filepath.Join(tmp, "argv-failed.jsonl")
	if err := trtreplay.WriteConfigFile(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	fb, _, _ := trtBundle(t, model+"Failed", bundletest.WithSamples(2))
	code, so, errs = submit(t, s, fb.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins", "--bench-time", "2s", "--wait")
	if code != cli.ExitFailed {
		t.Fatalf("submit exit %d, want %d for a failed run: %s", code, cli.ExitFailed, errs)
	}
	fst := so.Runs[0]
	g := fst.Graphs["0"]
	if fst.Status != runstate.RunFailed || g.Status != runstate.GraphFailed || g.Class != string(backend.FailBuild) || g.Attempts != 1 || !strings.Contains(g.Message, "AddScalar") {
		t.Fatalf("run %+v graph %+v", fst, g)
	}
	// Only the build ran: the version was known already, nothing to run.
	fcalls := trtreplay.ReadArgv(t, cfg.ArgvLog)
	if len(fcalls) != 1 || !reflect.DeepEqual(fcalls[0].Args[1:], wantBuild[1:]) {
		t.Errorf("failed run's invocations %q, want the build only", fcalls)
	}
	// Permanent: archived at once, never retried.
	wantArchivedOnce(t, s, fst.Run, "0")
	var fres tuner.Result
	if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(fst.Run, "0"), &fres); err != nil {
		t.Fatal(err)
	}
	if fres.OK() || len(fres.Results) != 1 || fres.Failure == nil || fres.Failure.Class != backend.FailBuild {
		t.Fatalf("failed result: winner %+v failure %+v", fres.Winner, fres.Failure)
	}
	fcr := fres.Results[0]
	if fcr.Status != backend.StatusFailed || fcr.Failure == nil || fcr.Failure.Class != backend.FailBuild ||
		!strings.Contains(fcr.Failure.Message, "plugin-not-found") || !strings.Contains(fcr.Failure.Message, "AddScalar") {
		t.Errorf("failed candidate: %s, failure %+v", fcr.Status, fcr.Failure)
	}
	var logs int
	for _, a := range fcr.Artifacts {
		if a.Role == "engine" {
			t.Errorf("a failed build left an engine artifact: %+v", a)
		}
		if a.Role == "log" {
			logs++
			if filepath.Base(a.Path) != trt.BuildLogFile || !bytes.Equal(fetchBlob(t, store, a), trtreplay.ReadFixture(t, trtreplay.LogPluginNotFound)) {
				t.Errorf("failed build's log blob %s: not the replayed log", a.Path)
			}
		}
	}
	if logs != 1 {
		t.Errorf("failed result artifacts %+v, want its build log", fcr.Artifacts)
	}
	// (e) The worker's ONNX Runtime session children inherit the stand-in's
	// config too, and still serve as session children: an ort candidate
	// runs for real (bundletest's reference outputs are not the model's,
	// so it is a wrong answer, not an infrastructure failure) and trtexec
	// is not called.
	cfg.ArgvLog = filepath.Join(tmp, "argv-ort.jsonl")
	if err := trtreplay.WriteConfigFile(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	code, so, errs = submit(t, s, b.Dir, "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--wait")
	if og := so.Runs[0].Graphs["0"]; code != cli.ExitFailed || og.Class != "wrong_answer" {
		t.Errorf("ort run: exit %d, graph %+v: %s", code, og, errs)
	}
	if _, err := os.Stat(cfg.ArgvLog); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ort run called trtexec: %v", err)
	}

	// A failed build is the candidate's problem, not the machine's: the
	// worker is still serving, and stops cleanly when asked.
	if w.cmd.ProcessState != nil {
		t.Fatal("the worker exited")
	}
	w.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("worker exit after SIGTERM: %v", err)
	}
	if strings.Contains(w.log.String(), "this machine is broken") {
		t.Errorf("a failed build marked the worker broken:\n%s", w.log)
	}
}
