package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/backend/replay"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/ort"
)

func TestParse(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.txt")
	if err := os.WriteFile(hist, []byte("# night of 2026-12-01\nresnet/0 90s\n30\n\n2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec    string
		want    func(replay.Config) bool
		wantErr string
	}{
		{"", func(c replay.Config) bool {
			return c.Dist == replay.DistLognormal && c.Scale == 1 && c.Median == time.Minute
		}, ""},
		{"dist=fixed,median=90s,scale=400,seed=7", func(c replay.Config) bool {
			return c.Dist == replay.DistFixed && c.Median == 90*time.Second && c.Scale == 400 && c.Seed == 7
		}, ""},
		{"median=2.5,sigma=0,latency=2ms", func(c replay.Config) bool {
			return c.Median == 2500*time.Millisecond && c.Sigma == 0 && c.Latency == 2*time.Millisecond
		}, ""},
		{"history=" + hist, func(c replay.Config) bool { return c.History == hist }, ""},
		{"dist=weibull", nil, "unknown distribution"},
		{"scale=0", nil, "scale=0: must be > 0"},
		{"scale=-3", nil, "must be > 0"},
		{"sigma=-1", nil, "must be ≥ 0"},
		{"median=-1s", nil, "must be ≥ 0"},
		{"speed=2", nil, "unknown key"},
		{"scale", nil, "not key=value"},
		{"history=" + hist + ".missing", nil, "history"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			c, err := replay.Parse(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), replay.Env) {
					t.Fatalf("Parse(%q) = %v, want an error naming %s with %q", tc.spec, err, replay.Env, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.want(c) {
				t.Fatalf("Parse(%q) = %+v, %v", tc.spec, c, err)
			}
		})
	}
}

// draws is the simulated time of n graphs of one model.
func draws(c replay.Config, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = c.Simulated("m", fmt.Sprint(i), "ort:cpu:basic")
	}
	return out
}

func TestDistributions(t *testing.T) {
	for _, tc := range []struct {
		spec        string
		median      time.Duration
		lo, hi      float64 // the 10th and 90th percentiles ÷ median: the spread sigma gives
		wantOneSize bool
	}{
		// A standard normal's 10th and 90th percentiles are ∓1.2816.
		{"median=60s,sigma=0.8", time.Minute, math.Exp(-0.8 * 1.2816), math.Exp(0.8 * 1.2816), false},
		{"median=10s,sigma=0.3", 10 * time.Second, math.Exp(-0.3 * 1.2816), math.Exp(0.3 * 1.2816), false},
		{"dist=fixed,median=42s", 42 * time.Second, 1, 1, true},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			c, err := replay.Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			ds := draws(c, 4001)
			slices.Sort(ds)
			at := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))]) / float64(tc.median) }
			// 4,001 draws: the empirical quantiles are within a few percent.
			if got := at(0.5); math.Abs(got-1) > 0.05 {
				t.Errorf("median %v, want about %v", ds[len(ds)/2], tc.median)
			}
			if got := at(0.1); math.Abs(got/tc.lo-1) > 0.08 {
				t.Errorf("10th percentile ÷ median %.3f, want about %.3f", got, tc.lo)
			}
			if got := at(0.9); math.Abs(got/tc.hi-1) > 0.08 {
				t.Errorf("90th percentile ÷ median %.3f, want about %.3f", got, tc.hi)
			}
			if tc.wantOneSize != (ds[0] == ds[len(ds)-1]) {
				t.Errorf("draws from %v to %v", ds[0], ds[len(ds)-1])
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	a, _ := replay.Parse("median=60s,sigma=0.8,seed=1")
	b, _ := replay.Parse("median=60s,sigma=0.8,seed=1")
	other, _ := replay.Parse("median=60s,sigma=0.8,seed=2")
	da, db, do := draws(a, 200), draws(b, 200), draws(other, 200)
	if !slices.Equal(da, db) {
		t.Fatal("the same seed drew different durations")
	}
	same := 0
	for i := range da {
		if da[i] == do[i] {
			same++
		}
	}
	if same > 2 {
		t.Errorf("seeds 1 and 2 drew %d of 200 durations alike", same)
	}
	if a.Simulated("m", "0", "ort:cpu:basic") == a.Simulated("m", "0", "ort:cpu:all") &&
		a.Simulated("m", "1", "ort:cpu:basic") == a.Simulated("m", "1", "ort:cpu:all") {
		t.Error("two candidates of a graph drew the same durations")
	}
	c, _ := replay.Parse("scale=400")
	if got := c.Compressed(400 * time.Second); got != time.Second {
		t.Errorf("400 s at scale 400 sleeps %v, want 1s", got)
	}
}

func TestHistory(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.txt")
	if err := os.WriteFile(hist, []byte("resnet/0 90s\n10\n20\n30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := replay.Parse("history=" + hist + ",seed=3")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Simulated("resnet", "0", "ort:cpu:basic"); got != 90*time.Second {
		t.Errorf("a graph the history names: %v, want its own 90s", got)
	}
	seen := map[time.Duration]bool{}
	for _, d := range draws(c, 300) {
		seen[d] = true
	}
	want := map[time.Duration]bool{10 * time.Second: true, 20 * time.Second: true, 30 * time.Second: true, 90 * time.Second: true}
	if len(seen) != len(want) {
		t.Errorf("graphs it does not name drew %v, want each of the history's %v", seen, want)
	}
	for d := range seen {
		if !want[d] {
			t.Errorf("drew %v, which the history does not hold", d)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.txt")
	os.WriteFile(bad, []byte("a b c\n"), 0o644)
	if _, err := replay.Parse("history=" + bad); err == nil || !strings.Contains(err.Error(), "bad.txt:1") {
		t.Errorf("a bad line: %v, want its file and line named", err)
	}
}

// TestBuildRunBenchmark builds a replay engine for a graph: it sleeps the
// compressed time, writes an engine file that records it, computes the
// identity (so the correctness check passes on an identity graph's
// reference outputs and fails on others), and measures real calls.
func TestBuildRunBenchmark(t *testing.T) {
	c, err := replay.Parse("dist=fixed,median=20s,scale=400,latency=200us")
	if err != nil {
		t.Fatal(err)
	}
	reg := replay.Wrap(backend.Registry{"ort": ort.New(ort.Options{})}, c)
	be := reg["ort"]
	cand, _ := backend.ParseCandidate("ort:cpu:basic")
	if err := be.Validate(cand); err != nil {
		t.Fatalf("Validate(%s) = %v", cand, err)
	}
	bad, _ := backend.ParseCandidate("ort:gpu9:turbo")
	if err := be.Validate(bad); err == nil {
		t.Errorf("Validate(%s) accepted what ort refuses", bad)
	}
	dir := t.TempDir()
	onnx := filepath.Join(dir, "model.onnx")
	os.WriteFile(onnx, []byte("not read as ONNX, only hashed"), 0o644)
	work := filepath.Join(t.TempDir(), "candidates", "0") // made by the backend, as ort does
	start := time.Now()
	eng, err := be.Build(context.Background(), backend.BuildRequest{Model: "m", Graph: bundle.Graph{Name: "0"}, ONNXPath: onnx, Candidate: cand, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("build returned after %v, before its compressed 50ms", took)
	}
	arts := eng.Artifacts()
	if len(arts) != 2 || arts[0].Role != "engine" || arts[1].Role != backend.RoleLog {
		t.Fatalf("artifacts %+v", arts)
	}
	raw, err := os.ReadFile(arts[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil || rec["format"] != replay.EngineFormat || rec["slept_ns"] != float64(50*time.Millisecond) {
		t.Errorf("engine file %s: %v", raw, err)
	}

	in := bundle.Tensor{Name: "input", DType: bundle.Float32, Shape: []int64{1, 4}}
	in.Data = make([]byte, 16)
	for i := range in.Data {
		in.Data[i] = byte(i)
	}
	ref := in
	ref.Name = "output"
	got, err := eng.Run(context.Background(), []bundle.Tensor{in}, backend.OutputSpecsLike([]bundle.Tensor{ref}))
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.Check(got, []bundle.Tensor{ref}, nil); err != nil {
		t.Errorf("identity against an identity graph's reference: %v", err)
	}
	other := ref
	other.Data = make([]byte, 16)
	other.Data[3] = 0x40 // the first float 2.0 where the input has about 0
	if err := backend.Check(got, []bundle.Tensor{other}, nil); err == nil {
		t.Error("identity passed against a graph that computes something else")
	}

	rule := backend.StopRule{Warmup: 2, Window: 5, MaxCV: 1, MinSamples: 5, MaxSamples: 20, MaxTime: 20 * time.Millisecond, MinCalls: 5}
	st, err := eng.Benchmark(context.Background(), 2, []bundle.Tensor{in}, backend.OutputSpecsLike([]bundle.Tensor{ref}), rule)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples < 5 || st.MinMs < 0.4 {
		t.Errorf("benchmark at batch 2 of 200µs per sample: %d calls, fastest %.3f ms", st.Samples, st.MinMs)
	}
}

func TestBuildHonoursContext(t *testing.T) {
	c, _ := replay.Parse("dist=fixed,median=1h")
	be := replay.Wrap(backend.Registry{"ort": ort.New(ort.Options{})}, c)["ort"]
	onnx := filepath.Join(t.TempDir(), "model.onnx")
	os.WriteFile(onnx, []byte("x"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cand, _ := backend.ParseCandidate("ort:cpu:basic")
	_, err := be.Build(ctx, backend.BuildRequest{Model: "m", Graph: bundle.Graph{Name: "0"}, ONNXPath: onnx, Candidate: cand, WorkDir: t.TempDir()})
	if backend.ClassOf(err, backend.FailBuild) != backend.FailTimeout {
		t.Errorf("a cancelled build: %v, want a timeout failure", err)
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		set, ok    bool
	}{
		{"unset", "", false, true},
		{"set", "scale=10,seed=3", true, true},
		{"bad", "scale=fast", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.set {
				t.Setenv(replay.Env, tc.spec)
			} else {
				t.Setenv(replay.Env, "")
				os.Unsetenv(replay.Env)
			}
			c, set, err := replay.Lookup()
			if set != tc.set || (err == nil) != tc.ok {
				t.Fatalf("Lookup() = %+v, %v, %v", c, set, err)
			}
			if tc.set && tc.ok && (c.Scale != 10 || c.Seed != 3 || c.Spec() != tc.spec) {
				t.Errorf("Lookup() = %+v, spec %q", c, c.Spec())
			}
		})
	}
}
