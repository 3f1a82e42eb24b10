package cli_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/graphcheck"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
)

// reluModel is x[N,4] → y[N,4] = Relu(x). baked puts a Reshape to the
// constant [2,4] in front, as a tracer that turned x.size(0) at the traced
// call (2) into a constant does; abs computes Abs instead, a graph that
// is wrong on every call.
func reluModel(kind string) *onnxtest.Builder {
	b := onnxtest.New("relu", 13)
	b.Input("x", onnxpb.TensorProto_FLOAT, "N", 4).Output("y", onnxpb.TensorProto_FLOAT, "N", 4)
	in := "x"
	if kind == "baked" {
		b.Int64s("traced_shape", []int64{2}, []int64{2, 4})
		b.Node("Reshape", []string{"x", "traced_shape"}, []string{"x2"})
		in = "x2"
	}
	op := "Relu"
	if kind == "abs" {
		op = "Abs"
	}
	b.Node(op, []string{in}, []string{"y"})
	return b
}

// recordedBundle is a bundle of the Relu graph recorded at batch 2 (sample
// 0) and batch 1 (sample 1), whose graph is then replaced by kind's: what a
// recorder that exported a wrong graph would write.
func recordedBundle(t *testing.T, kind string) string {
	t.Helper()
	dir := orttest.Bundle(t, "relu", orttest.Part{Model: reluModel(""), Shapes: []string{"x:1x4..2x4"}})
	if kind != "" {
		rel := bundletest.ReadManifest(t, dir).Graphs[0].ONNX
		if err := reluModel(kind).Write(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBundleCheck(t *testing.T) {
	t.Parallel()
	needORT(t)
	t.Run("reproduces", func(t *testing.T) {
		o := producer(t, "bundle", "check", "-o", "json", recordedBundle(t, ""))
		o.wantCode(t, cli.ExitOK)
		r := decodeCheck(t, o.stdout)
		if !r.OK || len(r.Graphs) != 1 || len(r.Graphs[0].Samples) != 2 || !r.Graphs[0].Samples[0].OK || !r.Graphs[0].Samples[1].OK {
			t.Errorf("want one graph with two passing samples: %+v", r)
		}
		// Per output: the largest |diff| (none: Relu is exact) and the
		// tolerance it is held to (float32's default).
		if outs := r.Graphs[0].Diffs; len(outs) != 1 || outs[0].Output != "y" || outs[0].MaxAbsDiff == nil || *outs[0].MaxAbsDiff != 0 ||
			outs[0].ATol != 1e-4 || outs[0].RTol != 1e-3 {
			t.Errorf("outputs %+v: want y with max_abs_diff 0, atol 1e-4, rtol 1e-3", outs)
		}
	})
	t.Run("max diff and tolerance", func(t *testing.T) {
		// Abs for Relu: every negative input x is off by |x|. The figure
		// is the largest of those over both samples, beside float32's
		// default tolerance.
		dir := recordedBundle(t, "abs")
		_, samples := openSamples(t, dir, "0")
		var worst float64
		for _, s := range samples {
			x := s.Inputs[0].Data
			for i := 0; i+4 <= len(x); i += 4 {
				worst = max(worst, -float64(min(math.Float32frombits(binary.LittleEndian.Uint32(x[i:])), 0)))
			}
		}
		if worst == 0 {
			t.Fatal("no negative input: the test shows nothing")
		}
		o := producer(t, "bundle", "check", "-o", "json", dir)
		o.wantCode(t, cli.ExitUsage)
		outs := decodeCheck(t, o.stdout).Graphs[0].Diffs
		if len(outs) != 1 || outs[0].MaxAbsDiff == nil || math.Abs(*outs[0].MaxAbsDiff-worst) > 1e-6 || outs[0].Sample == "" {
			t.Fatalf("outputs %+v: want y with max_abs_diff %g", outs, worst)
		}
		text := producer(t, "bundle", "check", dir)
		if want := fmt.Sprintf("  output y: max |diff| %.3g (%s); tolerance atol 0.0001 + rtol 0.001·|want|\n", worst, outs[0].Sample); !strings.Contains(text.stdout, want) {
			t.Errorf("bundle check does not say %q:\n%s", want, text)
		}
	})
	t.Run("traced-in size", func(t *testing.T) {
		dir := recordedBundle(t, "baked")
		o := producer(t, "bundle", "check", dir)
		o.wantCode(t, cli.ExitUsage)
		for _, w := range []string{`graph "0" cannot reproduce its recording`, "samples/1", "does not run", "Input shape:{1,4}, requested shape:{2,4}", "x [1 4] (sample 0: [2 4])", "likely cause: a size the exporter traced in as a constant", "Reshape"} {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("stderr lacks %q: %s", w, o)
			}
		}
		if strings.Count(o.stderr, "\n") != 1 {
			t.Errorf("stderr is not one line: %q", o.stderr)
		}
		// -o json: per-sample verdicts; the traced call passes, the other
		// does not.
		o = producer(t, "bundle", "check", "-o", "json", dir)
		o.wantCode(t, cli.ExitUsage)
		r := decodeCheck(t, o.stdout)
		s := r.Graphs[0].Samples
		if r.OK || r.Graphs[0].OK || len(s) != 2 || !s[0].OK || s[1].OK || s[1].Error == "" || s[1].Cause == "" {
			t.Errorf("want sample 0 ok and sample 1 failing with a cause: %+v", r)
		}
		// --first checks the traced call only, which reproduces.
		producer(t, "bundle", "check", "--first", dir).wantCode(t, cli.ExitOK)
	})
	t.Run("wrong values", func(t *testing.T) {
		o := producer(t, "bundle", "check", recordedBundle(t, "abs"))
		o.wantCode(t, cli.ExitUsage)
		for _, w := range []string{`graph "0" cannot reproduce its recording`, `output "y"`, "out of tolerance", "likely cause: the graph computes something other than the recorded outputs on every call", "[2 failures in all"} {
			if !strings.Contains(o.stderr, w) {
				t.Errorf("stderr lacks %q: %s", w, o)
			}
		}
	})
	t.Run("no such graph", func(t *testing.T) {
		producer(t, "bundle", "check", "--graph", "7", recordedBundle(t, "")).wantError(t, "producer", cli.ExitUsage, `has no graph "7"`)
	})
	t.Run("no library", func(t *testing.T) {
		o := producer(t, "bundle", "check", "--ort-lib", filepath.Join(t.TempDir(), "nope.so"), recordedBundle(t, ""))
		o.wantCode(t, cli.ExitInternal)
	})
}

func decodeCheck(t *testing.T, s string) graphcheck.Report {
	t.Helper()
	var r graphcheck.Report
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("check -o json does not parse: %v\n%s", err, s)
	}
	return r
}

// submit --check refuses a bundle whose graph cannot reproduce its first
// recorded call, before anything is uploaded: the store stays empty.
func TestSubmitCheckRefusesAGraphThatCannotReproduceItsRecording(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := recordedBundle(t, "abs")
	storeDir := filepath.Join(t.TempDir(), "store")
	producer(t, "submit", dir, "--check", "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--store", "file://"+storeDir).
		wantError(t, "producer", cli.ExitUsage, `graph "0" cannot reproduce its recording`, `output "y"`, "likely cause:", "not submitted")
	wantAbsent(t, storeDir)
	producer(t, "submit", recordedBundle(t, ""), "--check", "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--bench-time", benchTime, "--store", "file://"+storeDir).
		wantCode(t, cli.ExitOK)
}
