package trt_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/trt"
)

// The TensorRT versions whose trtexec the command builder targets, one per
// documented flag set (trtexec-nvml.md §1.1, §1.4).
var (
	v86   = trt.Version{Major: 8, Minor: 6, Patch: 1}
	v103  = trt.Version{Major: 10, Minor: 3}
	v1016 = trt.Version{Major: 10, Minor: 16, Build: 72}
	v111  = trt.Version{Major: 11, Minor: 1}
)

func mustCandidate(tb testing.TB, s string) backend.Candidate {
	tb.Helper()
	c, err := backend.ParseCandidate(s)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func mustConfig(tb testing.TB, s string) trt.Config {
	tb.Helper()
	cfg, err := trt.ParseConfig(mustCandidate(tb, s))
	if err != nil {
		tb.Fatalf("ParseConfig(%s): %v", s, err)
	}
	return cfg
}

// checkArgv asserts what trtexec's parser needs of every element: one
// option, "--name" or "--name=value".
func checkArgv(tb testing.TB, args []string) {
	tb.Helper()
	seen := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") || strings.ContainsAny(name, " \t") {
			tb.Errorf("argument %q is not --name[=value]", a)
		}
		if seen[name] && name != "--profile" && !strings.HasSuffix(name, "Shapes") {
			tb.Errorf("option %s given twice (trtexec consumes each once)", name)
		}
		seen[name] = true
	}
}

var resnetProfile = shapes.Profile{Inputs: []shapes.InputProfile{{
	Name: "input", Min: []int64{1, 3, 224, 224}, Opt: []int64{8, 3, 224, 224}, Max: []int64{32, 3, 224, 224},
}}}

// TestBuildArgsPerVersion compares full command lines, candidate by
// candidate and version by version, with what trtexec-nvml.md documents:
// the precision flags per version (no --bf16/--stronglyTyped in 8.6, no
// weak-typing flags or --calib in 11, where strong typing is the default),
// --memPoolSize as a bare number of MiB everywhere (§1.5), shape lists as
// name:dims.
func TestBuildArgsPerVersion(t *testing.T) {
	spec := trt.BuildSpec{
		ONNX: "/data/graph 0/model.onnx", Engine: "model.plan", Profiles: []shapes.Profile{resnetProfile},
		TimingCache: "cache/timing.cache", LayerInfo: "layers.json",
	}
	head := []string{
		"--onnx=/data/graph 0/model.onnx", "--saveEngine=model.plan",
		"--minShapes=input:1x3x224x224", "--optShapes=input:8x3x224x224", "--maxShapes=input:32x3x224x224",
	}
	tail := []string{"--timingCacheFile=cache/timing.cache", "--profilingVerbosity=detailed", "--exportLayerInfo=layers.json", "--skipInference"}
	type exp struct {
		flags []string // between the shapes and the tail
		err   string   // or the error
	}
	weakGone := "removed the weak-typing flags"
	cases := []struct {
		cand string
		v86  exp
		v10  exp // 10.3 and 10.16
		v11  exp
	}{
		{"trt:fp32", exp{}, exp{}, exp{}},
		{"trt", exp{}, exp{}, exp{}},
		{"trt:fp32:noTF32", exp{flags: []string{"--noTF32"}}, exp{flags: []string{"--noTF32"}}, exp{flags: []string{"--noTF32"}}},
		{"trt:fp16", exp{flags: []string{"--fp16"}}, exp{flags: []string{"--fp16"}}, exp{err: weakGone}},
		{"trt:fp16:noTF32", exp{flags: []string{"--fp16", "--noTF32"}}, exp{flags: []string{"--fp16", "--noTF32"}}, exp{err: weakGone}},
		{"trt:bf16", exp{err: "--bf16 exists from TensorRT 10.0"}, exp{flags: []string{"--bf16"}}, exp{err: weakGone}},
		{"trt:int8", exp{flags: []string{"--int8"}}, exp{flags: []string{"--int8"}}, exp{err: weakGone}},
		{"trt:int8:calib=calib.cache", exp{flags: []string{"--int8", "--calib=calib.cache"}}, exp{flags: []string{"--int8", "--calib=calib.cache"}}, exp{err: weakGone}},
		{"trt:fp8", exp{flags: []string{"--fp8"}}, exp{flags: []string{"--fp8"}}, exp{err: weakGone}},
		{"trt:best", exp{flags: []string{"--best"}}, exp{flags: []string{"--best"}}, exp{err: weakGone}},
		{"trt:strongly-typed", exp{err: "--stronglyTyped exists from TensorRT 10.0"}, exp{flags: []string{"--stronglyTyped"}}, exp{}},
		{"trt:strongly-typed:noTF32:opt=0", exp{err: "--stronglyTyped"}, exp{flags: []string{"--stronglyTyped", "--noTF32", "--builderOptimizationLevel=0"}}, exp{flags: []string{"--noTF32", "--builderOptimizationLevel=0"}}},
		{"trt:fp16:int8", exp{flags: []string{"--fp16", "--int8"}}, exp{flags: []string{"--fp16", "--int8"}}, exp{err: weakGone}},
		{"trt:int8:fp16", exp{flags: []string{"--fp16", "--int8"}}, exp{flags: []string{"--fp16", "--int8"}}, exp{err: weakGone}},
		{"trt:bf16:fp16", exp{err: "--bf16"}, exp{flags: []string{"--fp16", "--bf16"}}, exp{err: weakGone}},
		{"trt:fp16:opt=5:workspace=4096", exp{flags: []string{"--fp16", "--memPoolSize=workspace:4096", "--builderOptimizationLevel=5"}}, exp{flags: []string{"--fp16", "--memPoolSize=workspace:4096", "--builderOptimizationLevel=5"}}, exp{err: weakGone}},
		{"trt:fp32:workspace=1", exp{flags: []string{"--memPoolSize=workspace:1"}}, exp{flags: []string{"--memPoolSize=workspace:1"}}, exp{flags: []string{"--memPoolSize=workspace:1"}}},
		{"trt:strongly-typed:workspace=8192:opt=3", exp{err: "--stronglyTyped"}, exp{flags: []string{"--stronglyTyped", "--memPoolSize=workspace:8192", "--builderOptimizationLevel=3"}}, exp{flags: []string{"--memPoolSize=workspace:8192", "--builderOptimizationLevel=3"}}},
	}
	for _, tc := range cases {
		cfg := mustConfig(t, tc.cand)
		for _, vc := range []struct {
			v trt.Version
			e exp
		}{{v86, tc.v86}, {v103, tc.v10}, {v1016, tc.v10}, {v111, tc.v11}} {
			t.Run(tc.cand+"@"+vc.v.String(), func(t *testing.T) {
				args, err := trt.BuildArgs(vc.v, cfg, spec)
				if vc.e.err != "" {
					if err == nil || !strings.Contains(err.Error(), vc.e.err) {
						t.Fatalf("BuildArgs = %q, %v; want an error with %q", args, err, vc.e.err)
					}
					// The same answer as Supported, and a permanent one.
					if serr := cfg.Supported(vc.v); serr == nil || serr.Error() != err.Error() {
						t.Errorf("Supported = %v, BuildArgs = %v", serr, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Concat(head, vc.e.flags, tail)
				if !reflect.DeepEqual(args, want) {
					t.Errorf("BuildArgs =\n  %q\nwant\n  %q", args, want)
				}
				checkArgv(t, args)
			})
		}
	}
}

// TestShapeNameRules: §1.3. trtexec splits a shape list at every comma,
// then each item at its last colon; quotes switch to 'name':value; 10.x
// reads '*' as a wildcard.
func TestShapeNameRules(t *testing.T) {
	prof := func(ips ...shapes.InputProfile) []shapes.Profile { return []shapes.Profile{{Inputs: ips}} }
	static := func(name string, dims ...int64) shapes.InputProfile {
		return shapes.InputProfile{Name: name, Min: dims, Opt: dims, Max: dims}
	}
	cfg := mustConfig(t, "trt:fp16")
	cases := []struct {
		name     string
		profiles []shapes.Profile
		v        trt.Version
		want     []string // the three (or more) shape arguments
		err      string
	}{
		{"colon in name works unquoted (the 8.2 fixture's x:0)", prof(shapes.InputProfile{Name: "x:0", Min: []int64{1, 1, 28, 28}, Opt: []int64{4, 1, 28, 28}, Max: []int64{16, 1, 28, 28}}), v86,
			[]string{"--minShapes=x:0:1x1x28x28", "--optShapes=x:0:4x1x28x28", "--maxShapes=x:0:16x1x28x28"}, ""},
		{"colon on 10.16", prof(static("serving_default:input:0", 1, 4)), v1016,
			[]string{"--minShapes=serving_default:input:0:1x4", "--optShapes=serving_default:input:0:1x4", "--maxShapes=serving_default:input:0:1x4"}, ""},
		{"two inputs joined by commas", prof(static("a", 2, 8), static("mask", 2, 8)), v103,
			[]string{"--minShapes=a:2x8,mask:2x8", "--optShapes=a:2x8,mask:2x8", "--maxShapes=a:2x8,mask:2x8"}, ""},
		{"comma refused", prof(static("a,b", 1)), v1016, nil, "contains a comma"},
		{"comma refused on 8.6 too", prof(static("x,y", 1)), v86, nil, "cannot be expressed"},
		{"quote refused", prof(static("it's", 1)), v103, nil, "single quote"},
		{"star is a wildcard from 10.0", prof(static("in*", 1)), v103, nil, "wildcard"},
		{"star is a name on 8.6", prof(static("in*", 1)), v86, []string{"--minShapes=in*:1", "--optShapes=in*:1", "--maxShapes=in*:1"}, ""},
		{"empty name", prof(static("", 1)), v103, nil, "empty name"},
		{"scalar on 10.x", prof(static("s")), v1016, []string{"--minShapes=s:scalar", "--optShapes=s:scalar", "--maxShapes=s:scalar"}, ""},
		{"scalar on 8.6", prof(static("s")), v86, nil, "0-D"},
		{"negative dim", prof(static("x", -1, 4)), v103, nil, "concrete"},
		{"opt outside range", prof(shapes.InputProfile{Name: "x", Min: []int64{2}, Opt: []int64{1}, Max: []int64{4}}), v103, nil, "min ≤ opt ≤ max"},
		{"rank mismatch", prof(shapes.InputProfile{Name: "x", Min: []int64{2}, Opt: []int64{2, 1}, Max: []int64{4}}), v103, nil, "ranks"},
		{"no profile", nil, v103, nil, "no optimization profile"},
		{"two profiles on 10.x", []shapes.Profile{{Inputs: []shapes.InputProfile{static("x", 1, 4)}}, {Inputs: []shapes.InputProfile{{Name: "x", Min: []int64{2, 4}, Opt: []int64{8, 4}, Max: []int64{16, 4}}}}}, v1016,
			[]string{"--profile=0", "--minShapes=x:1x4", "--optShapes=x:1x4", "--maxShapes=x:1x4", "--profile=1", "--minShapes=x:2x4", "--optShapes=x:8x4", "--maxShapes=x:16x4"}, ""},
		{"two profiles on 8.6", []shapes.Profile{{Inputs: []shapes.InputProfile{static("x", 1)}}, {Inputs: []shapes.InputProfile{static("x", 2)}}}, v86, nil, "builds one optimization profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, err := trt.BuildArgs(tc.v, cfg, trt.BuildSpec{ONNX: "m.onnx", Engine: "model.plan", Profiles: tc.profiles})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("BuildArgs = %q, %v; want error with %q", args, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The shape arguments sit right after --onnx and --saveEngine
			// (a --profile group must be immediately followed by its shapes).
			got := args[2 : 2+len(tc.want)]
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shape args = %q, want %q", got, tc.want)
			}
			checkArgv(t, args)
		})
	}
}

// TestShapeArgsMatchFixtureCommands: the shape arguments built for the
// fixtures' profiles are the very arguments real trtexec runs accepted.
func TestShapeArgsMatchFixtureCommands(t *testing.T) {
	for name, prof := range map[string]shapes.InputProfile{
		fxTRT82Fail: {Name: "x:0", Min: []int64{1, 1, 28, 28}, Opt: []int64{4, 1, 28, 28}, Max: []int64{16, 1, 28, 28}},
		fxTRT86:     {Name: "input", Min: []int64{1, 3, 224, 224}, Opt: []int64{8, 3, 224, 224}, Max: []int64{64, 3, 224, 224}},
	} {
		l := parseFixture(t, name)
		args, err := trt.BuildArgs(v86, mustConfig(t, "trt:fp16"), trt.BuildSpec{ONNX: "model.onnx", Engine: "e", Profiles: []shapes.Profile{{Inputs: []shapes.InputProfile{prof}}}})
		if err != nil {
			t.Fatal(err)
		}
		echoed := strings.Fields(l.Command)
		for _, a := range append(args[2:5], "--fp16") {
			if !slices.Contains(echoed, a) {
				t.Errorf("%s: %q is not in the fixture's command %q", name, a, l.Command)
			}
		}
	}
}

// TestWorkspaceUnits: the units trap of §1.5. A workspace is only ever a
// bare number of MiB; anything with a unit is refused at parse time.
func TestWorkspaceUnits(t *testing.T) {
	for _, bad := range []string{"4G", "1024MiB", "1024M", "0", "-5", "1.5", "2048B", "99999999999999"} {
		if _, err := trt.ParseConfig(mustCandidate(t, "trt:fp16:workspace="+bad)); err == nil || !strings.Contains(err.Error(), "without a unit") {
			t.Errorf("workspace=%s: %v, want a refusal naming the unit rule", bad, err)
		}
	}
	for _, v := range []trt.Version{v86, v103, v1016, v111} {
		args, err := trt.BuildArgs(v, mustConfig(t, "trt:fp32:workspace=1024"), trt.BuildSpec{ONNX: "m", Engine: "e", Profiles: []shapes.Profile{resnetProfile}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(args, "--memPoolSize=workspace:1024") {
			t.Errorf("%s: %q lacks --memPoolSize=workspace:1024", v, args)
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--workspace") {
				t.Errorf("%s: deprecated/removed %s", v, a)
			}
		}
	}
}

func TestRunArgs(t *testing.T) {
	ins := []trt.InputFile{{Name: "x:0", Shape: []int64{4, 1, 28, 28}, File: "run-1/0.bin"}, {Name: "mask", Shape: []int64{4, 8}, File: "run-1/1.bin"}}
	want := []string{"--loadEngine=model.plan", "--shapes=x:0:4x1x28x28,mask:4x8", "--loadInputs=x:0:run-1/0.bin,mask:run-1/1.bin",
		"--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput=run-1/outputs.json"}
	for _, v := range []trt.Version{v86, v103, v1016, v111} {
		args, err := trt.RunArgs(v, trt.RunSpec{Engine: "model.plan", Inputs: ins, ExportOutput: "run-1/outputs.json"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(args, want) {
			t.Errorf("%s: RunArgs =\n  %q\nwant\n  %q", v, args, want)
		}
		checkArgv(t, args)
	}
	for _, bad := range []trt.InputFile{{Name: "x", Shape: []int64{1}, File: "a,b.bin"}, {Name: "x", Shape: []int64{1}, File: "C:/in.bin"}, {Name: "x,y", Shape: []int64{1}, File: "in.bin"}, {Name: "x", Shape: []int64{1}}} {
		if _, err := trt.RunArgs(v103, trt.RunSpec{Engine: "e", Inputs: []trt.InputFile{bad}, ExportOutput: "o"}); err == nil {
			t.Errorf("RunArgs accepted %+v", bad)
		}
	}
	if _, err := trt.RunArgs(trt.Version{Major: 7, Minor: 2}, trt.RunSpec{Engine: "e", ExportOutput: "o"}); err == nil {
		t.Error("RunArgs accepted TensorRT 7.2")
	}
}

func TestBenchArgs(t *testing.T) {
	ins := []trt.InputFile{{Name: "input", Shape: []int64{8, 4}, File: "bench-2-bs8/0.bin"}}
	io := []string{"--loadEngine=model.plan", "--shapes=input:8x4", "--loadInputs=input:bench-2-bs8/0.bin"}
	stable := []string{"--noDataTransfers", "--useCudaGraph", "--useSpinWait"}
	timing := func(warm, dur, iters string) []string {
		return []string{"--warmUp=" + warm, "--duration=" + dur, "--iterations=" + iters, "--exportTimes=bench-2-bs8/times.json"}
	}
	rule := backend.DefaultStopRule()
	long := rule
	long.MaxTime = 30 * time.Second
	long.MinSamples, long.MaxSamples = 500, 5000
	short := rule
	short.MaxTime, short.Warmup = 1500*time.Millisecond, 0
	cases := []struct {
		v    trt.Version
		rule backend.StopRule
		want []string
	}{
		{v86, rule, slices.Concat(io, stable, timing("500", "2", "100"))},
		{v103, rule, slices.Concat(io, stable, timing("500", "2", "100"))},
		{v1016, long, slices.Concat(io, stable, timing("3000", "30", "500"))},
		// 11: the stable settings are the defaults and the flags deprecated.
		{v111, rule, slices.Concat(io, timing("500", "2", "100"))},
		{v111, short, slices.Concat(io, timing("0", "1.5", "100"))},
	}
	for _, tc := range cases {
		args, err := trt.BenchArgs(tc.v, trt.BenchSpec{Engine: "model.plan", Inputs: ins, ExportTimes: "bench-2-bs8/times.json", Rule: tc.rule})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(args, tc.want) {
			t.Errorf("%s: BenchArgs =\n  %q\nwant\n  %q", tc.v, args, tc.want)
		}
		checkArgv(t, args)
		for _, a := range args {
			if strings.HasPrefix(a, "--exportProfile") || strings.HasPrefix(a, "--dumpProfile") {
				t.Errorf("%s: %s would suppress the performance summary", tc.v, a)
			}
		}
	}
	if _, err := trt.BenchArgs(v103, trt.BenchSpec{Engine: "e", ExportTimes: "t", Rule: backend.StopRule{}}); err == nil {
		t.Error("BenchArgs accepted an invalid stop rule")
	}
}

func TestVerbose(t *testing.T) {
	args, err := trt.BuildArgs(v103, mustConfig(t, "trt:fp16"), trt.BuildSpec{ONNX: "m", Engine: "e", Profiles: []shapes.Profile{resnetProfile}, Verbose: true})
	if err != nil || args[len(args)-1] != "--verbose" {
		t.Errorf("BuildArgs = %q, %v", args, err)
	}
}
