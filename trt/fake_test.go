package trt_test

// The fake-trtexec replayer: a stand-in for trtexec that lives in test code
// only. The test binary re-executes itself with fakeEnv naming a JSON
// config; it then records the argv it was given, replays a real fixture log
// (its [W]/[E]/[F] lines to stderr and everything else to stdout, as
// trtexec does), writes the files the command line asks for, and exits
// with the configured status. It never stands for TensorRT anywhere but in
// these tests.

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

// fakeEnv names the fake's config file.
const fakeEnv = "TUNEFLEET_FAKE_TRTEXEC"

// fakeConfig is what the fake does.
type fakeConfig struct {
	// ArgvLog receives one JSON line per invocation.
	ArgvLog string `json:"argv_log"`
	// Banner is the "&&&& RUNNING TensorRT.trtexec [TensorRT vNNNN]" part
	// printed for --help.
	Banner string `json:"banner"`
	// Replays per kind of invocation.
	Build fakeReplay `json:"build"`
	Run   fakeReplay `json:"run"`
	Bench fakeReplay `json:"bench"`
	// Outputs maps the digest of a run's input files (inputsKey) to the
	// --exportOutput JSON to write.
	Outputs map[string]string `json:"outputs"`
	// TimesFile is copied to --exportTimes, LayerInfo to --exportLayerInfo.
	TimesFile string `json:"times_file"`
	LayerInfo string `json:"layer_info"`
	// PlanVersion goes into the fake plan's header.
	PlanVersion [4]byte `json:"plan_version"`
}

// fakeReplay is one kind of invocation's behaviour.
type fakeReplay struct {
	Log    string `json:"log"`    // fixture log to replay
	Exit   int    `json:"exit"`   // exit status after replaying
	Signal int    `json:"signal"` // or die by this signal
	// Hang: start a grandchild that sleeps, write its pid to HangPIDFile,
	// then sleep: for the kill-the-group tests.
	Hang        bool   `json:"hang"`
	HangPIDFile string `json:"hang_pid_file"`
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(fakeEnv); cfg != "" {
		os.Exit(fakeMain(cfg, os.Args[1:]))
	}
	if os.Getenv(fakeEnv+"_SLEEP") != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeArgv is one recorded invocation.
type fakeArgv struct {
	Args []string `json:"args"`
	Dir  string   `json:"dir"`
}

func fakeMain(cfgPath string, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "[01/01/2026-00:00:00] [E] fake-trtexec: "+format+"\n", a...)
		return 3
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	var cfg fakeConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fail("%v", err)
	}
	if cfg.ArgvLog != "" {
		wd, _ := os.Getwd()
		line, _ := json.Marshal(fakeArgv{Args: args, Dir: wd})
		f, err := os.OpenFile(cfg.ArgvLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail("%v", err)
		}
		f.Write(append(line, '\n'))
		f.Close()
	}
	opt := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return fail("argument %q is not --name[=value]", a)
		}
		k, v, _ := strings.Cut(a, "=")
		if _, dup := opt[k]; dup {
			// trtexec consumes each option once; a repeat is an unknown option.
			return fail("option %s given twice", k)
		}
		opt[k] = v
	}
	var rp fakeReplay
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
	if rp.Hang {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), fakeEnv+"=", fakeEnv+"_SLEEP=1")
		if err := child.Start(); err != nil {
			return fail("%v", err)
		}
		os.WriteFile(rp.HangPIDFile, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		time.Sleep(time.Minute)
		return 0
	}
	if rp.Exit == 0 && rp.Signal == 0 {
		if code := fakeOutputs(cfg, opt); code != 0 {
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

// fakeOutputs writes what a successful invocation's flags ask for.
func fakeOutputs(cfg fakeConfig, opt map[string]string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "[01/01/2026-00:00:00] [E] fake-trtexec: "+format+"\n", a...)
		fmt.Println("&&&& FAILED TensorRT.trtexec [TensorRT v0] # fake")
		return 1
	}
	if p, ok := opt["--saveEngine"]; ok {
		// A plan header: "ftrt", a zero word, the version at bytes 24..27.
		h := make([]byte, 64)
		binary.LittleEndian.PutUint32(h[0:], 0x74727466)
		copy(h[24:28], cfg.PlanVersion[:])
		if err := os.WriteFile(p, h, 0o644); err != nil {
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
		key, err := fakeInputsKey(opt["--shapes"], opt["--loadInputs"])
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

// fakeInputsKey reads --loadInputs the way trtexec does (split at every
// ',', then at the last ':'), checks each file's size against --shapes
// (float32 inputs, as in the fixture bundles; trtexec's "Unexpected file
// size" check) and digests names and bytes.
func fakeInputsKey(shapesArg, loadArg string) (string, error) {
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
	return inputsKey(ts), nil
}

// inputsKey digests a run's inputs: names and raw bytes, in order.
func inputsKey(ts []bundle.Tensor) string {
	h := sha256.New()
	for _, t := range ts {
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		h.Write(t.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// exportOutputJSON writes tensors exactly as trtexec's exportJSONOutput
// does: its separators and line breaks, values with C++ default stream
// formatting (six significant digits).
func exportOutputJSON(ts []bundle.Tensor) string {
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

// writeFakeConfig writes a config and returns the environment entry that
// makes the test binary act as trtexec.
func writeFakeConfig(tb testing.TB, cfg fakeConfig) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "fake-trtexec.json")
	b, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return fakeEnv + "=" + p
}

// readArgv returns the invocations the fake recorded.
func readArgv(tb testing.TB, path string) []fakeArgv {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var out []fakeArgv
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var a fakeArgv
		if err := json.Unmarshal(line, &a); err != nil {
			tb.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// selfExe is the test binary, which acts as trtexec under fakeEnv.
func selfExe(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe
}
