package trtreplay

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// Env names the stand-in's config file. A test binary's TestMain calls
// Main when it is set (see the package documentation).
const Env = "TUNEFLEET_TRTREPLAY_CONFIG"

// sleepEnv marks the helper process a hanging invocation leaves behind:
// it only sleeps.
const sleepEnv = "TUNEFLEET_TRTREPLAY_SLEEP"

// PlanMagic is the first little-endian word of the fake plan --saveEngine
// writes ("ftrt", as a real TensorRT plan starts).
const PlanMagic = 0x74727466

// PlanSize is the size of the fake plan.
const PlanSize = 64

// Config is what the stand-in does.
type Config struct {
	// ArgvLog receives one JSON line (an Argv) per invocation; "" records
	// nothing.
	ArgvLog string `json:"argv_log"`
	// Banner is the "&&&& RUNNING TensorRT.trtexec [TensorRT vNNNN]" part
	// printed for --help.
	Banner string `json:"banner"`
	// Replays per kind of invocation: a build has --onnx, a correctness
	// run --exportOutput, a benchmark --exportTimes.
	Build Replay `json:"build"`
	Run   Replay `json:"run"`
	Bench Replay `json:"bench"`
	// Outputs maps the digest of a run's input files (InputsKey) to the
	// --exportOutput JSON to write (ExportOutputJSON).
	Outputs map[string]string `json:"outputs"`
	// TimesFile is copied to --exportTimes, LayerInfo to --exportLayerInfo.
	TimesFile string `json:"times_file"`
	LayerInfo string `json:"layer_info"`
	// PlanVersion goes into the fake plan's header, at bytes 24..27.
	PlanVersion [4]byte `json:"plan_version"`
}

// Replay is one kind of invocation's behaviour.
type Replay struct {
	Log    string `json:"log"`    // fixture log to replay
	Exit   int    `json:"exit"`   // exit status after replaying
	Signal int    `json:"signal"` // or die by this signal
	// Hang: start a helper process that sleeps, write its pid to
	// HangPIDFile, then sleep: for the kill-the-group tests.
	Hang        bool   `json:"hang"`
	HangPIDFile string `json:"hang_pid_file"`
	// Gate: create Gate+".waiting", then wait until the file Gate exists
	// before going on as configured: a test knows the build is under way
	// (the task is being tuned), does what it must then (a Redis
	// failover), and lets the build finish by creating Gate.
	Gate string `json:"gate,omitempty"`
}

// Argv is one recorded invocation.
type Argv struct {
	Args []string `json:"args"`
	Dir  string   `json:"dir"`
	// ONNXSHA256 is the digest of the file --onnx named, read when the
	// stand-in ran ("" without --onnx or when it could not be read): the
	// model it was given, which the caller may have removed since.
	ONNXSHA256 string `json:"onnx_sha256,omitempty"`
}

// Main is the stand-in: it reads the config at cfgPath, acts on args (the
// argv after the executable) and returns the exit status.
func Main(cfgPath string, args []string) int {
	if os.Getenv(sleepEnv) != "" {
		time.Sleep(time.Minute)
		return 0
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "[01/01/2026-00:00:00] [E] trtreplay: "+format+"\n", a...)
		return 3
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fail("%v", err)
	}
	opt := map[string]string{}
	var bad error
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			bad = fmt.Errorf("argument %q is not --name[=value]", a)
			break
		}
		k, v, _ := strings.Cut(a, "=")
		if _, dup := opt[k]; dup {
			// trtexec consumes each option once; a repeat is an unknown option.
			bad = fmt.Errorf("option %s given twice", k)
			break
		}
		opt[k] = v
	}
	if cfg.ArgvLog != "" {
		wd, _ := os.Getwd()
		rec := Argv{Args: args, Dir: wd}
		if p, ok := opt["--onnx"]; ok {
			if b, err := os.ReadFile(p); err == nil {
				sum := sha256.Sum256(b)
				rec.ONNXSHA256 = hex.EncodeToString(sum[:])
			}
		}
		line, _ := json.Marshal(rec)
		f, err := os.OpenFile(cfg.ArgvLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail("%v", err)
		}
		f.Write(append(line, '\n'))
		f.Close()
	}
	if bad != nil {
		return fail("%v", bad)
	}
	var rp Replay
	switch {
	case hasKey(opt, "--help"):
		fmt.Printf("%s # %s --help\n=== Model Options ===\n  --onnx=<file>  ONNX model\n", cfg.Banner, os.Args[0])
		return 0
	case hasKey(opt, "--onnx"):
		rp = cfg.Build
	case hasKey(opt, "--exportOutput"):
		rp = cfg.Run
	case hasKey(opt, "--exportTimes"):
		rp = cfg.Bench
	default:
		return fail("cannot tell what %v is for", args)
	}
	if rp.Gate != "" {
		os.WriteFile(rp.Gate+".waiting", nil, 0o644)
		for {
			if _, err := os.Stat(rp.Gate); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rp.Hang {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), sleepEnv+"=1")
		if err := child.Start(); err != nil {
			return fail("%v", err)
		}
		os.WriteFile(rp.HangPIDFile, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		time.Sleep(time.Minute)
		return 0
	}
	if rp.Exit == 0 && rp.Signal == 0 {
		if code := writeOutputs(cfg, opt); code != 0 {
			return code
		}
	}
	if rp.Log != "" {
		logb, err := os.ReadFile(rp.Log)
		if err != nil {
			return fail("%v", err)
		}
		for _, line := range bytes.SplitAfter(logb, []byte("\n")) {
			if isStderrLine(line) {
				os.Stderr.Write(line)
			} else {
				os.Stdout.Write(line)
			}
		}
	}
	if rp.Signal != 0 {
		// The Go runtime turns SIGABRT/SIGSEGV into exit status 2 unless
		// tracebacks "crash", which re-raises the signal: then the process
		// dies by it, as trtexec's abort() does.
		debug.SetTraceback("crash")
		syscall.Kill(os.Getpid(), syscall.Signal(rp.Signal))
		time.Sleep(time.Second)
	}
	return rp.Exit
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// isStderrLine: trtexec's logger sends WARNING and worse to stderr.
func isStderrLine(line []byte) bool {
	return len(line) > 24 && line[0] == '[' && line[22] == '[' && bytes.IndexByte([]byte("WEF"), line[23]) >= 0
}

// Plan is the fake plan --saveEngine writes for a config: "ftrt", a zero
// word, the plan version at bytes 24..27, zeros to PlanSize.
func Plan(cfg Config) []byte {
	h := make([]byte, PlanSize)
	binary.LittleEndian.PutUint32(h[0:], PlanMagic)
	copy(h[24:28], cfg.PlanVersion[:])
	return h
}

// writeOutputs writes what a successful invocation's flags ask for.
func writeOutputs(cfg Config, opt map[string]string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "[01/01/2026-00:00:00] [E] trtreplay: "+format+"\n", a...)
		fmt.Println("&&&& FAILED TensorRT.trtexec [TensorRT v0] # trtreplay")
		return 1
	}
	if p, ok := opt["--saveEngine"]; ok {
		if err := os.WriteFile(p, Plan(cfg), 0o644); err != nil {
			return fail("%v", err)
		}
	}
	if p, ok := opt["--timingCacheFile"]; ok {
		// trtexec reads the cache, merges what the build timed, rewrites it.
		old, _ := os.ReadFile(p)
		if err := os.WriteFile(p, append(old, []byte("timing;")...), 0o644); err != nil {
			return fail("%v", err)
		}
	}
	if p, ok := opt["--exportLayerInfo"]; ok && cfg.LayerInfo != "" {
		if err := copyTo(cfg.LayerInfo, p); err != nil {
			return fail("%v", err)
		}
	}
	if p, ok := opt["--exportTimes"]; ok && cfg.TimesFile != "" {
		if err := copyTo(cfg.TimesFile, p); err != nil {
			return fail("%v", err)
		}
	}
	if _, ok := opt["--loadInputs"]; ok {
		key, err := loadInputsKey(opt["--shapes"], opt["--loadInputs"])
		if err != nil {
			return fail("%v", err)
		}
		if p, ok := opt["--exportOutput"]; ok {
			out, ok := cfg.Outputs[key]
			if !ok {
				return fail("no outputs recorded for these inputs (%s)", key)
			}
			if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
				return fail("%v", err)
			}
		}
	}
	return 0
}

// loadInputsKey reads --loadInputs the way trtexec does (split at every
// ',', then at the last ':'), checks each file's size against --shapes
// (float32 inputs, as in the fixture bundles; trtexec's "Unexpected file
// size" check) and digests names and bytes.
func loadInputsKey(shapesArg, loadArg string) (string, error) {
	dims := map[string][]int64{}
	for _, item := range strings.Split(shapesArg, ",") {
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return "", fmt.Errorf("bad --shapes item %q", item)
		}
		d, err := shapes.ParseShape(item[i+1:])
		if err != nil {
			return "", err
		}
		dims[item[:i]] = d
	}
	var ts []bundle.Tensor
	for _, item := range strings.Split(loadArg, ",") {
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return "", fmt.Errorf("bad --loadInputs item %q", item)
		}
		name, file := item[:i], item[i+1:]
		data, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		d, ok := dims[name]
		if !ok {
			return "", fmt.Errorf("Invalid tensor names found in --shapes flag (no %q)", name)
		}
		if want := bundle.NumElements(d) * 4; int64(len(data)) != want {
			return "", fmt.Errorf("Unexpected file size for input file: %s (%d bytes, want %d)", file, len(data), want)
		}
		ts = append(ts, bundle.Tensor{Name: name, Data: data})
	}
	return InputsKey(ts), nil
}

// InputsKey digests a run's inputs: names and raw bytes, in order. It keys
// Config.Outputs.
func InputsKey(ts []bundle.Tensor) string {
	h := sha256.New()
	for _, t := range ts {
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		h.Write(t.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ExportOutputJSON writes tensors exactly as trtexec's exportJSONOutput
// does: its separators and line breaks, values with C++ default stream
// formatting (six significant digits).
func ExportOutputJSON(ts []bundle.Tensor) string {
	var b strings.Builder
	b.WriteString("[\n")
	sep := "  "
	for _, t := range ts {
		fmt.Fprintf(&b, "%s{ \"name\" : \"%s\"\n", sep, t.Name)
		sep = ", "
		fmt.Fprintf(&b, "  %s\"dimensions\" : \"%s\"\n", sep, strings.Join(dimStrings(t.Shape), "x"))
		fmt.Fprintf(&b, "  %s\"values\" : [ ", sep)
		for i := int64(0); i < t.Len(); i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(cppFloat(t.Float64At(i)))
		}
		b.WriteString(" ]\n  }\n")
	}
	b.WriteString("]\n")
	return b.String()
}

// SampleOutputs maps each sample's inputs to its reference outputs, as
// Config.Outputs wants them: the stand-in then answers every recorded
// sample with the bundle's own reference.
func SampleOutputs(samples []bundle.Sample) map[string]string {
	out := map[string]string{}
	for _, s := range samples {
		out[InputsKey(s.Inputs)] = ExportOutputJSON(s.Outputs)
	}
	return out
}

// Banner103 is the banner of TensorRT 10.3's trtexec.
const Banner103 = "&&&& RUNNING TensorRT.trtexec [TensorRT v100300]"

// Working is a TensorRT 10.3 trtexec that builds (replaying LogTRT103),
// answers correctness runs from outputs (SampleOutputs, GraphOutputs) and
// benchmarks with the RTX 3090 trace: the stand-in most tests start from
// and change one part of.
func Working(tb testing.TB, outputs map[string]string) Config {
	tb.Helper()
	return Config{
		Banner:      Banner103,
		Build:       Replay{Log: Fixture(tb, LogTRT103)},
		Run:         Replay{Log: Fixture(tb, LogDumpProfile)},
		Bench:       Replay{Log: Fixture(tb, LogTRT103)},
		Outputs:     outputs,
		TimesFile:   Fixture(tb, TimesRTX3090),
		LayerInfo:   Fixture(tb, LayersTRT1016),
		PlanVersion: [4]byte{10, 3, 0, 26},
	}
}

// GraphOutputs is SampleOutputs plus the answers for the first sample run at
// the graph's smallest and largest declared batch, as the tuner's bounds
// check runs it: inputs resized the way the tuner resizes them, outputs the
// first sample's reference outputs resized the same way (the check looks
// only at their shapes and finiteness).
func GraphOutputs(tb testing.TB, g bundle.Graph, explicit shapes.DynamicShapes, samples []bundle.Sample) map[string]string {
	tb.Helper()
	out := SampleOutputs(samples)
	if len(samples) == 0 {
		return out
	}
	specs := bundle.Specs(g.Inputs)
	resize := func(ts []bundle.Tensor, decls []bundle.TensorDecl, bs int) []bundle.Tensor {
		res, err := bundle.ResizeBatch(ts, decls, bs)
		if err != nil {
			tb.Fatal(err)
		}
		return res
	}
	for _, bs := range []int{shapes.MinBatchSize(specs, explicit), shapes.MaxBatchSize(specs, explicit)} {
		ins := resize(samples[0].Inputs, g.Inputs, bs)
		if _, ok := out[InputsKey(ins)]; !ok {
			out[InputsKey(ins)] = ExportOutputJSON(resize(samples[0].Outputs, g.Outputs, bs))
		}
	}
	return out
}

func dimStrings(s []int64) []string {
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = strconv.FormatInt(d, 10)
	}
	return out
}

// cppFloat formats like std::ostream's default for a float: %g with six
// significant digits.
func cppFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func copyTo(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// WriteConfig writes cfg to a new file under tb.TempDir() and returns the
// environment entry (Env=path) that makes a test binary act as trtexec.
func WriteConfig(tb testing.TB, cfg Config) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "trtreplay.json")
	if err := WriteConfigFile(p, cfg); err != nil {
		tb.Fatal(err)
	}
	return Env + "=" + p
}

// WriteConfigFile writes cfg to path. The stand-in reads its config at
// every invocation, so rewriting the file changes what the next one does.
func WriteConfigFile(path string, cfg Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadArgv returns the invocations recorded in path, in order.
func ReadArgv(tb testing.TB, path string) []Argv {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var out []Argv
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var a Argv
		if err := json.Unmarshal(line, &a); err != nil {
			tb.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// Executable is the running test binary, which acts as trtexec under Env.
func Executable(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe
}
