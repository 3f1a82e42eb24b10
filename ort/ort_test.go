package ort_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
)

func TestMain(m *testing.M) {
	if os.Getenv("TUNEFLEET_TEST_CRASH") == "1" && os.Getenv(ort.ChildEnv) == "1" {
		// A stand-in child that dies the way a crashing ONNX Runtime kernel
		// would: by SIGSEGV, before answering.
		syscall.Kill(os.Getpid(), syscall.SIGSEGV)
		select {}
	}
	if os.Getenv("TUNEFLEET_TEST_GARBLE") == "1" && os.Getenv(ort.ChildEnv) == "1" {
		// A stand-in child that logs twice, a moment apart, then answers
		// with bytes that are no reply and waits for more requests, as a
		// child of another version would.
		fmt.Fprintln(os.Stderr, "first line")
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "second line")
		os.Stdout.WriteString(strings.Repeat("garbage, not a gob reply\n", 20))
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	orttest.Main(m)
}

func needORT(t testing.TB) { orttest.Need(t) }

func f32Tensor(name string, shape []int64, vals []float32) bundle.Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Float32, Shape: shape, Data: b}
}

// affineModel is y = Relu(x·W + b) with x[N,3], W 3×2, and known weights so
// the reference can be computed in Go.
func affineModel(t *testing.T) (string, bundle.Graph) {
	t.Helper()
	w := []float32{1, -2, 0.5, 3, -1, 0.25}
	bias := []float32{0.1, -0.2}
	b := onnxtest.New("affine", 13)
	b.Input("x", onnxpb.TensorProto_FLOAT, "N", 3).Output("y", onnxpb.TensorProto_FLOAT, "N", 2)
	b.Floats("w", []int64{3, 2}, w).Floats("b", []int64{2}, bias)
	b.Node("MatMul", []string{"x", "w"}, []string{"h"})
	b.Node("Add", []string{"h", "b"}, []string{"z"})
	b.Node("Relu", []string{"z"}, []string{"y"})
	path := filepath.Join(t.TempDir(), "affine.onnx")
	if err := b.Write(path); err != nil {
		t.Fatal(err)
	}
	g := bundle.Graph{
		Name: "0", ONNX: "affine.onnx",
		Inputs:  []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.SpecFromRange("x", []int64{1, 3}, []int64{8, 3}, true)}},
		Outputs: []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.SpecFromRange("y", []int64{1, 2}, []int64{8, 2}, true)}},
	}
	return path, g
}

func affineRef(x []float32) []float32 {
	w := []float32{1, -2, 0.5, 3, -1, 0.25}
	bias := []float32{0.1, -0.2}
	n := len(x) / 3
	out := make([]float32, 2*n)
	for i := 0; i < n; i++ {
		for j := 0; j < 2; j++ {
			v := bias[j]
			for k := 0; k < 3; k++ {
				v += x[3*i+k] * w[2*k+j]
			}
			out[2*i+j] = max(v, 0)
		}
	}
	return out
}

func build(t *testing.T, cand string) (backend.Engine, bundle.Graph, string) {
	t.Helper()
	needORT(t)
	path, g := affineModel(t)
	c, err := backend.ParseCandidate(cand)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	e, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: path, Candidate: c, WorkDir: work})
	if err != nil {
		t.Fatalf("build %s: %v", cand, err)
	}
	t.Cleanup(func() { e.Close() })
	return e, g, work
}

func TestRunMatchesGoReferenceAtEveryLevel(t *testing.T) {
	x := []float32{1, 2, 3, -1, -2, -3, 0.5, 0.25, -4}
	want := f32Tensor("y", []int64{3, 2}, affineRef(x))
	for _, level := range ort.Levels {
		t.Run(level, func(t *testing.T) {
			e, _, work := build(t, "ort:cpu:"+level)
			got, err := e.Run(context.Background(), []bundle.Tensor{f32Tensor("x", []int64{3, 3}, x)}, backend.OutputSpecsLike([]bundle.Tensor{want}))
			if err != nil {
				t.Fatal(err)
			}
			if err := backend.Check(got, []bundle.Tensor{want}, nil); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(filepath.Join(work, ort.EngineFile)); err != nil || st.Size() == 0 {
				t.Fatalf("optimized model not written: %v", err)
			}
			if e.Info()["ort_version"] != "1.24.1" {
				t.Errorf("ort_version = %q", e.Info()["ort_version"])
			}
		})
	}
}

func TestRuntimeAllocatedOutputs(t *testing.T) {
	e, _, _ := build(t, "ort:cpu:basic")
	x := []float32{1, 2, 3}
	got, err := e.Run(context.Background(), []bundle.Tensor{f32Tensor("x", []int64{1, 3}, x)}, []backend.OutputSpec{{Name: "y", DType: bundle.Float32}})
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.Check(got, []bundle.Tensor{f32Tensor("y", []int64{1, 2}, affineRef(x))}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBenchmark(t *testing.T) {
	e, _, _ := build(t, "ort:cpu:extended:threads=1")
	in := f32Tensor("x", []int64{4, 3}, make([]float32, 12))
	rule := backend.DefaultStopRule()
	rule.MaxTime = 200 * time.Millisecond
	st, err := e.Benchmark(context.Background(), 4, []bundle.Tensor{in}, []backend.OutputSpec{{Name: "y", DType: bundle.Float32, Shape: []int64{4, 2}}}, rule)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples < rule.Window || st.BatchSize != 4 || !(st.P50Ms > 0) || !(st.Throughput > 0) || st.P50Ms > st.P99Ms {
		t.Fatalf("implausible stats %+v", st)
	}
}

func TestBuildFailures(t *testing.T) {
	needORT(t)
	_, g := affineModel(t)
	notONNX := filepath.Join(t.TempDir(), "bad.onnx")
	os.WriteFile(notONNX, []byte("this is not a model"), 0o644)
	c, _ := backend.ParseCandidate("ort:cpu:basic")
	_, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: notONNX, Candidate: c, WorkDir: t.TempDir()})
	if backend.ClassOf(err, "") != backend.FailBuild {
		t.Fatalf("not-ONNX build: got %v, want a build failure", err)
	}
	_, err = ort.New(ort.Options{Library: "/nonexistent/libonnxruntime.so"}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: notONNX, Candidate: c, WorkDir: t.TempDir()})
	if backend.ClassOf(err, "") != backend.FailInfrastructure {
		t.Fatalf("missing library: got %v, want an infrastructure failure", err)
	}
}

// buildWithStandIn builds the affine model with this test binary as the
// session child, in the stand-in mode env selects (see TestMain), in dir.
func buildWithStandIn(t *testing.T, env, dir string) error {
	t.Helper()
	needORT(t)
	path, g := affineModel(t)
	exe, _ := os.Executable()
	c, _ := backend.ParseCandidate("ort:cpu:basic")
	_, err := ort.New(ort.Options{Command: []string{exe, "-test.run=^$"}, Env: []string{env + "=1"}}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: path, Candidate: c, WorkDir: dir})
	return err
}

func TestChildCrashIsAFailureNotACrash(t *testing.T) {
	err := buildWithStandIn(t, "TUNEFLEET_TEST_CRASH", t.TempDir())
	var f *backend.Failure
	if !errors.As(err, &f) || f.Class != backend.FailBuild {
		t.Fatalf("got %v, want a build failure", err)
	}
	if want := "SIGSEGV"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// A reply that does not decode is a failed build, not a hang (the child,
// alive and waiting, is made to exit), and everything the child wrote to
// stderr is in the candidate's log, however late it wrote it.
func TestGarbledReplyFailsAndTheLogKeepsStderr(t *testing.T) {
	dir := t.TempDir()
	err := buildWithStandIn(t, "TUNEFLEET_TEST_GARBLE", dir)
	if backend.ClassOf(err, "") != backend.FailBuild {
		t.Fatalf("got %v, want a build failure", err)
	}
	log, rerr := os.ReadFile(filepath.Join(dir, ort.LogFile))
	if rerr != nil || !strings.Contains(string(log), "first line\nsecond line\n") {
		t.Fatalf("log %q (%v), want both lines the child wrote", log, rerr)
	}
	if !strings.Contains(err.Error(), "second line") {
		t.Errorf("error %q does not end with what the child printed", err)
	}
}

func TestContextEndKillsTheSession(t *testing.T) {
	e, _, _ := build(t, "ort:cpu:basic")
	rule := backend.StopRule{Warmup: 0, Window: 2, MaxCV: 1e-9, MinSamples: 1 << 30, MaxSamples: 1 << 30, MaxTime: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	in := f32Tensor("x", []int64{1, 3}, make([]float32, 3))
	_, err := e.Benchmark(ctx, 1, []bundle.Tensor{in}, []backend.OutputSpec{{Name: "y", DType: bundle.Float32, Shape: []int64{1, 2}}}, rule)
	if backend.ClassOf(err, "") != backend.FailTimeout {
		t.Fatalf("got %v, want a timeout failure", err)
	}
	if _, err := e.Run(context.Background(), []bundle.Tensor{in}, nil); err == nil {
		t.Fatal("a killed session still answers")
	}
}

// A benchmark whose context asks for progress hears the timed calls from
// the session child while it measures, in increasing counts that end at or
// below the calls the final statistics summarise.
func TestBenchmarkReportsCallsFromTheChild(t *testing.T) {
	e, _, _ := build(t, "ort:cpu:basic")
	// Never stable: the measurement runs for MaxTime, several reporting
	// intervals of the child.
	rule := backend.StopRule{Warmup: 0, Window: 64, MaxCV: 1e-12, MinSamples: 64, MaxSamples: 1 << 30, MaxTime: 1500 * time.Millisecond}
	var mu sync.Mutex
	var heard []int
	ctx := backend.WithCallProgress(context.Background(), func(n int) {
		mu.Lock()
		heard = append(heard, n)
		mu.Unlock()
	})
	in := f32Tensor("x", []int64{1, 3}, make([]float32, 3))
	st, err := e.Benchmark(ctx, 1, []bundle.Tensor{in}, []backend.OutputSpec{{Name: "y", DType: bundle.Float32, Shape: []int64{1, 2}}}, rule)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) == 0 || !slices.IsSorted(heard) || heard[0] < 1 || heard[len(heard)-1] > st.Samples {
		t.Fatalf("heard %v during a benchmark of %d calls", heard, st.Samples)
	}
	// Without a listener the child sends nothing extra: the same engine
	// still answers plain requests after a reported benchmark.
	if _, err := e.Benchmark(context.Background(), 1, []bundle.Tensor{in}, []backend.OutputSpec{{Name: "y", DType: bundle.Float32, Shape: []int64{1, 2}}}, backend.StopRule{Window: 2, MaxCV: 1, MinSamples: 2, MaxSamples: 2, MaxTime: time.Second}); err != nil {
		t.Fatal(err)
	}
}
