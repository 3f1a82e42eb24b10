package ort_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	onnx "github.com/yalue/onnxruntime_go"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
)

// BenchmarkBackendVsBareRun compares the median latency the ORT backend
// measures (session in a child process, timed by backend.Measure) with a
// bare onnxruntime_go Run loop in this process, on the same model, batch and
// session options, measured in alternating rounds of one run. The ratio is
// the backend's measurement overhead; the target is ≤ 1.05.
func BenchmarkBackendVsBareRun(b *testing.B) {
	needORT(b)
	for _, tc := range []struct {
		name  string
		model *onnxtest.Builder
		in    string
		shape []int64
		out   string
		oshp  []int64
	}{
		{"mlp-64-256-10/batch1", onnxtest.MLP(64, 256, 10), "input", []int64{1, 64}, "output", []int64{1, 10}},
		{"mlp-64-256-10/batch32", onnxtest.MLP(64, 256, 10), "input", []int64{32, 64}, "output", []int64{32, 10}},
		{"convnet/batch8", onnxtest.ConvNet(), "image", []int64{8, 3, 16, 16}, "logits", []int64{8, 10}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "model.onnx")
			if err := tc.model.Write(path); err != nil {
				b.Fatal(err)
			}
			in := f32Tensor(tc.in, tc.shape, make([]float32, bundle.NumElements(tc.shape)))
			for i := range in.Data {
				in.Data[i] = byte(i % 7) // small non-zero floats
			}
			outs := []backend.OutputSpec{{Name: tc.out, DType: bundle.Float32, Shape: tc.oshp}}
			rule := backend.StopRule{Warmup: 200, Window: 20, MaxCV: 1e-9, MinSamples: 20, MaxSamples: 3000, MaxTime: time.Second}

			g := bundle.Graph{
				Inputs:  []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.TensorSpec{Name: tc.in}}},
				Outputs: []bundle.TensorDecl{{DType: bundle.Float32, TensorSpec: shapes.TensorSpec{Name: tc.out}}},
			}
			c, _ := backend.ParseCandidate("ort:cpu:extended:threads=1")
			eng, err := ort.New(ort.Options{}).Build(context.Background(), backend.BuildRequest{Graph: g, ONNXPath: path, Candidate: c, WorkDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			bare := newBareLoop(b, path, tc.in, tc.out, in, tc.oshp)
			defer bare.close()

			var backendP50, bareP50 []float64
			for round := 0; round < 5; round++ {
				st, err := eng.Benchmark(context.Background(), int(tc.shape[0]), []bundle.Tensor{in}, outs, rule)
				if err != nil {
					b.Fatal(err)
				}
				backendP50 = append(backendP50, st.P50Ms)
				bareP50 = append(bareP50, bare.p50(b, rule.Warmup, rule.MaxSamples, rule.MaxTime))
			}
			bk, br := median(backendP50), median(bareP50)
			ratio := bk / br
			b.ReportMetric(ratio, "backend/bare")
			b.ReportMetric(bk*1000, "backend-p50-µs")
			b.ReportMetric(br*1000, "bare-p50-µs")
			// The rounds alternate the legs: a bare loop whose rounds
			// disagree measured the machine's load, not the backend.
			fmt.Printf("ORT backend vs bare onnxruntime_go Run, %s: median p50 %.2f µs / %.2f µs = %.3f (target ≤ 1.05, met: %s)\n", tc.name, bk*1000, br*1000, ratio,
				verdict.Of(ratio <= 1.05, verdict.Spread("the bare loop's p50", bareP50, 1.5), verdict.Spread("the backend's p50", backendP50, 1.5)))
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// bareLoop is the reference: a session with the backend's options and
// pre-allocated tensors, timed call by call.
type bareLoop struct {
	s       *onnx.DynamicAdvancedSession
	in, out *onnx.Tensor[float32]
}

var envOnce bool

func newBareLoop(b *testing.B, path, inName, outName string, in bundle.Tensor, outShape []int64) *bareLoop {
	b.Helper()
	if !envOnce {
		lib, _ := ort.FindLibrary("")
		onnx.SetSharedLibraryPath(lib)
		if err := onnx.InitializeEnvironment(onnx.WithLogLevelError()); err != nil {
			b.Fatal(err)
		}
		envOnce = true
	}
	o, err := onnx.NewSessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer o.Destroy()
	o.SetGraphOptimizationLevel(onnx.GraphOptimizationLevelEnableExtended)
	o.SetIntraOpNumThreads(1)
	o.SetInterOpNumThreads(1)
	o.AddSessionConfigEntry("session.intra_op.allow_spinning", "0")
	o.AddSessionConfigEntry("session.inter_op.allow_spinning", "0")
	s, err := onnx.NewDynamicAdvancedSession(path, []string{inName}, []string{outName}, o)
	if err != nil {
		b.Fatal(err)
	}
	vals := make([]float32, in.Len())
	for i := range vals {
		vals[i] = float32(in.Float64At(int64(i)))
	}
	inT, err := onnx.NewTensor(onnx.NewShape(in.Shape...), vals)
	if err != nil {
		b.Fatal(err)
	}
	outT, err := onnx.NewEmptyTensor[float32](onnx.NewShape(outShape...))
	if err != nil {
		b.Fatal(err)
	}
	return &bareLoop{s: s, in: inT, out: outT}
}

func (l *bareLoop) p50(b *testing.B, warmup, n int, limit time.Duration) float64 {
	ins, outs := []onnx.Value{l.in}, []onnx.Value{l.out}
	for i := 0; i < warmup; i++ {
		if err := l.s.Run(ins, outs); err != nil {
			b.Fatal(err)
		}
	}
	durs := make([]float64, 0, n)
	start := time.Now()
	for len(durs) < n && time.Since(start) < limit {
		t0 := time.Now()
		if err := l.s.Run(ins, outs); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, float64(time.Since(t0))/float64(time.Millisecond))
	}
	return median(durs)
}

func (l *bareLoop) close() {
	l.in.Destroy()
	l.out.Destroy()
	l.s.Destroy()
}
