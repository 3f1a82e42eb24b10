package cli_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/tuner"
)

// What real pre-trained models asked of `bundle from-onnx` and `worker
// tune` (issue 10): each test here failed before its fix.

func writeModel(t *testing.T, name string, b *onnxtest.Builder) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".onnx")
	if err := b.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// tuneJSON runs `worker tune -o json` and returns its results.
func tuneJSON(t *testing.T, bundleDir string, extra ...string) []tuner.Result {
	t.Helper()
	args := append([]string{"tune", bundleDir, "--candidates", "ort:cpu:basic", "--bench-time", benchTime, "-q", "-o", "json",
		"--out", filepath.Join(t.TempDir(), "out")}, extra...)
	o := worker(t, args...)
	o.wantCode(t, cli.ExitOK)
	var rs []tuner.Result
	if err := json.Unmarshal([]byte(o.stdout), &rs); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	return rs
}

// A scalar input (a sample rate) beside batched ones used to turn the
// batch sweep off for all of them, and the batch-4 sample it measured
// instead was reported "at batch 1". The state's batch axis is axis 1:
// found by its dim name "N", or given with --batch-axis when unnamed.
func TestScalarInputKeepsTheBatchSweep(t *testing.T) {
	t.Parallel()
	needORT(t)
	for _, tt := range []struct {
		name, stateDim string
		extra          []string
	}{
		{"state batch named N", "N", nil},
		{"state batch unnamed, --batch-axis", "", []string{"--batch-axis", "state:1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			args := append([]string{"bundle", "from-onnx", writeModel(t, "streaming", onnxtest.Streaming(tt.stateDim)), "--out", out,
				"--shape", "x:1x4..4x4", "--shape", "state:2x1x3..2x4x3", "--value", "sr=16000"}, tt.extra...)
			producer(t, args...).wantCode(t, cli.ExitOK)
			// The state output's batch axis is found too: by its name,
			// or, unnamed, because its size is the batch in every sample.
			if got := validate(t, out).Graphs[0].Outputs; !slices.Contains(got, "state_out float32[2,batch1=1..4,3]") {
				t.Errorf("outputs %q: state_out's axis 1 is not its batch axis", got)
			}
			rs := tuneJSON(t, out)
			r := rs[0]
			if !slices.Equal(r.BatchSizes, []int{1, 2, 4}) || r.NoSweep != "" {
				t.Fatalf("batch sizes %v (no sweep: %q), want the sweep [1 2 4]", r.BatchSizes, r.NoSweep)
			}
			if !r.OK() {
				t.Fatalf("no winner: %+v", r.Failure)
			}
			var got []int
			for _, st := range r.Results[0].Benchmarks {
				got = append(got, st.BatchSize)
			}
			if !slices.Equal(got, []int{1, 2, 4}) {
				t.Errorf("measured at batches %v, want [1 2 4]", got)
			}
		})
	}
}

// Without a batch axis there is no sweep, and the result says why.
func TestNoSweepSaysWhy(t *testing.T) {
	t.Parallel()
	needORT(t)
	out := filepath.Join(t.TempDir(), "bundle")
	producer(t, "bundle", "from-onnx", writeModel(t, "streaming", onnxtest.Streaming("N")), "--out", out,
		"--shape", "x:3x4..3x4", "--shape", "state:2x3x3..2x3x3", "--value", "sr=8000").wantCode(t, cli.ExitOK)
	r := tuneJSON(t, out)[0]
	if len(r.BatchSizes) != 0 || !strings.Contains(r.NoSweep, "no input has a batch axis") || !strings.Contains(r.NoSweep, "--batch-axis") {
		t.Fatalf("batch sizes %v, no_sweep %q", r.BatchSizes, r.NoSweep)
	}
	// The table says it too.
	o := worker(t, "tune", out, "--candidates", "ort:cpu:basic", "--bench-time", benchTime, "-q", "--out", filepath.Join(t.TempDir(), "o"))
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "graph 0: no batch sweep: no input has a batch axis") {
		t.Errorf("the table does not say why nothing was swept:\n%s", o.stdout)
	}
}

// --batch-axis mistakes are the user's, named before any work.
func TestBatchAxisFlagErrors(t *testing.T) {
	t.Parallel()
	needORT(t)
	model := writeModel(t, "streaming", onnxtest.Streaming(""))
	base := []string{"bundle", "from-onnx", model, "--shape", "x:1x4..4x4", "--shape", "state:2x1x3..2x4x3"}
	for _, tt := range []struct {
		flag string
		want string
	}{
		{"nope:1", `--batch-axis names "nope", which is not an input`},
		{"state:7", "--batch-axis state:7: the input has rank 3"},
		{"state:0", "axis 0 is 2 in both the min and the max shape"},
		{"state", "want INPUT:AXIS"},
	} {
		out := filepath.Join(t.TempDir(), "b")
		producer(t, append(base, "--out", out, "--batch-axis", tt.flag)...).wantError(t, "producer", cli.ExitUsage, tt.want)
		wantAbsent(t, out)
	}
}

// --value mistakes likewise.
func TestValueFlagErrors(t *testing.T) {
	t.Parallel()
	needORT(t)
	model := writeModel(t, "streaming", onnxtest.Streaming("N"))
	base := []string{"bundle", "from-onnx", model, "--shape", "x:1x4..4x4", "--shape", "state:2x1x3..2x4x3"}
	for _, tt := range []struct{ flag, want string }{
		{"rate=16000", `--value names "rate", which is not an input`},
		{"sr=fast", `"fast" is not a finite number`},
		{"16000", "want INPUT=VALUE"},
	} {
		out := filepath.Join(t.TempDir(), "b")
		producer(t, append(base, "--out", out, "--value", tt.flag)...).wantError(t, "producer", cli.ExitUsage, tt.want)
		wantAbsent(t, out)
	}
}

// Every input that needs --shape is named in one error, with suggestions
// that make sense: an image gets 224×224, not 1×1.
func TestFromONNXNamesEveryDynamicInputOnce(t *testing.T) {
	t.Parallel()
	needORT(t)
	out := filepath.Join(t.TempDir(), "b")
	o := producer(t, "bundle", "from-onnx", writeModel(t, "three", onnxtest.ThreeDynamic()), "--out", out)
	o.wantError(t, "producer", cli.ExitUsage,
		"3 input(s) have dynamic dims and need --shape NAME:MIN..MAX: image [N 3 H W], tokens [batch seq], extra (no declared shape); "+
			"e.g. --shape image:1x3x224x224..8x3x224x224 --shape tokens:1x16..8x16 --shape extra:MIN..MAX")
	wantAbsent(t, out)
}

// float16 outputs, dynamic and static, used to fail the reference run
// with "not enough space: expected 64, got 32".
func TestFromONNXFloat16Outputs(t *testing.T) {
	t.Parallel()
	needORT(t)
	out := filepath.Join(t.TempDir(), "bundle")
	producer(t, "bundle", "from-onnx", writeModel(t, "half", onnxtest.Half()), "--out", out, "--shape", "x:1x2..8x6").wantCode(t, cli.ExitOK)
	r := tuneJSON(t, out)[0]
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
	if len(r.Results[0].Benchmarks) != len(r.BatchSizes) || len(r.BatchSizes) < 2 {
		t.Errorf("swept %v, measured %d", r.BatchSizes, len(r.Results[0].Benchmarks))
	}
}

// A model stamped with an opset whose operators ONNX Runtime no longer
// implements says so, and how to upgrade it. The message comes from the
// ort backend's build, so a worker's candidate failure says the same.
func TestFromONNXOldOpset(t *testing.T) {
	t.Parallel()
	needORT(t)
	out := filepath.Join(t.TempDir(), "b")
	model := writeModel(t, "old", onnxtest.OldOpset())
	want := []string{"needs ONNX opset 6", "no longer has (it runs opset 7 and later)", "convert_version", "AveragePool(1)"}
	producer(t, "bundle", "from-onnx", model, "--out", out, "--shape", "x:1x1x4x4..2x1x4x4").wantError(t, "producer", cli.ExitUsage, want...)
	wantAbsent(t, out)
}

// --atol/--rtol on all three commands: from-onnx writes them into the
// bundle, worker tune and submit apply them for their tuning; a wrong
// answer's message says how to loosen them.
func TestToleranceFlags(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := mlpBundle(t, "--atol", "output=0.5", "--rtol", "0.25")
	raw, err := os.ReadFile(filepath.Join(dir, "bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"tolerances"`) || !strings.Contains(string(raw), `"atol": 0.5`) || !strings.Contains(string(raw), `"rtol": 0.25`) {
		t.Fatalf("bundle.json has no tolerances from the flags:\n%s", raw)
	}
	perturbed := mlpBundle(t)
	p := filepath.Join(perturbed, "graphs", "0", "samples", "0", "output_0.pb")
	ref, err := bundle.ReadTensorFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(ref.Data))
	binary.LittleEndian.PutUint32(ref.Data, math.Float32bits(v+0.5))
	enc, err := bundle.EncodeTensorProto(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	o := worker(t, "tune", perturbed, "--candidates", "ort:cpu:basic", "--bench-time", benchTime, "-q", "-o", "json", "--out", filepath.Join(t.TempDir(), "o"))
	o.wantCode(t, cli.ExitFailed)
	var rs []tuner.Result
	if err := json.Unmarshal([]byte(o.stdout), &rs); err != nil {
		t.Fatal(err)
	}
	msg := rs[0].Results[0].Failure.Message
	if !strings.Contains(msg, "loosen the tolerance: --atol output=") {
		t.Fatalf("wrong_answer message says nothing about loosening: %s", msg)
	}
	if r := tuneJSON(t, perturbed, "--atol", "1e30"); !r[0].OK() {
		t.Fatalf("--atol 1e30 did not accept the difference: %+v", r[0].Failure)
	}
	worker(t, "tune", perturbed, "--atol", "logits=1", "--out", filepath.Join(t.TempDir(), "o2")).
		wantError(t, "worker", cli.ExitUsage, `"logits" is not an output of any graph`)
	worker(t, "tune", perturbed, "--rtol", "x=-1", "--out", filepath.Join(t.TempDir(), "o3")).
		wantError(t, "worker", cli.ExitUsage, "not a finite non-negative number")
	store := "file://" + filepath.Join(t.TempDir(), "store")
	producer(t, "submit", perturbed, "--store", store, "--candidates", "ort:cpu:basic", "--bench-time", benchTime, "--atol", "logits=1").
		wantError(t, "producer", cli.ExitUsage, `"logits" is not an output of any graph`)
	producer(t, "submit", perturbed, "--store", store, "--candidates", "ort:cpu:basic", "--bench-time", benchTime, "--atol", "1e30").
		wantCode(t, cli.ExitOK)
}

// An interrupted tune (Ctrl-C: the context ends) leaves no --out behind,
// and no staging directory either.
func TestTuneInterruptedLeavesNoOut(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := mlpBundle(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := &cancelOnWrite{cancel: cancel, after: "graph 0: ort:cpu:basic"}
	code := cli.ExecuteContext(ctx, cli.NewWorker(), []string{"tune", dir, "--candidates", "ort:cpu:basic,ort:cpu:extended,ort:cpu:all",
		"--bench-time", benchTime, "--out", out, "--progress"}, &strings.Builder{}, progress)
	if code == cli.ExitOK {
		t.Fatalf("an interrupted tune exited 0; stderr:\n%s", progress.buf.String())
	}
	if !progress.fired {
		t.Fatalf("the tune never got to its first candidate; stderr:\n%s", progress.buf.String())
	}
	wantAbsent(t, out)
	if left := entries(t, parent); len(left) != 0 {
		t.Errorf("the interrupted tune left %v in --out's folder", left)
	}
}

// cancelOnWrite is a stderr that ends the command's context once a
// progress line containing after is written.
type cancelOnWrite struct {
	buf    strings.Builder
	cancel context.CancelFunc
	after  string
	fired  bool
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if !c.fired && strings.Contains(c.buf.String(), c.after) {
		c.fired = true
		c.cancel()
	}
	return len(p), nil
}
