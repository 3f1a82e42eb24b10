package trt

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/shapes"
)

// Every function here returns argv elements for exec.Command: one element
// per option, always "--name" or "--name=value". trtexec splits each element
// at its first '=' and rejects anything it does not consume (a value in a
// separate element is an unknown option), and no shell is involved, so
// nothing is quoted.

// BuildSpec is what a build command needs besides the candidate's Config.
// Paths are passed as given; the backend runs trtexec in the work directory
// and gives paths relative to it, so that no path it chose can contain a
// character trtexec's list syntax treats specially.
type BuildSpec struct {
	ONNX     string           // --onnx
	Engine   string           // --saveEngine
	Profiles []shapes.Profile // one or more optimization profiles, in order
	// TimingCache is --timingCacheFile; empty builds with a throw-away cache.
	TimingCache string
	// Calib is the INT8 calibration cache (--calib), resolved; empty lets
	// the Config's own Calib stand.
	Calib string
	// LayerInfo is --exportLayerInfo (engine inspector JSON); the build then
	// records detailed profiling verbosity in the plan.
	LayerInfo string
	Verbose   bool
}

// BuildArgs is the command line that builds and saves an engine and skips
// inference. Per version (trtexec-nvml.md §1.4-1.6): 8.6 builds one
// optimization profile and has no --bf16/--stronglyTyped; 10.x adds
// --profile=N groups; 11 has neither weak-typing flags nor --calib. The
// workspace is always --memPoolSize=workspace:<bare MiB> (§1.5: a unit
// suffix means different things in 8.6, 10.0 and 10.1+; --workspace=N is
// deprecated in 8.6 and gone in 10).
func BuildArgs(v Version, cfg Config, spec BuildSpec) ([]string, error) {
	if err := cfg.Supported(v); err != nil {
		return nil, err
	}
	if spec.ONNX == "" || spec.Engine == "" {
		return nil, fmt.Errorf("build command: the ONNX model and the engine file are required")
	}
	args := []string{"--onnx=" + spec.ONNX, "--saveEngine=" + spec.Engine}
	prof, err := profileArgs(v, spec.Profiles)
	if err != nil {
		return nil, err
	}
	args = append(args, prof...)
	for _, p := range cfg.Weak {
		args = append(args, "--"+string(p))
	}
	if cfg.StronglyTyped && v.Major < 11 {
		// 11 is strongly typed by default and the flag is a no-op.
		args = append(args, "--stronglyTyped")
	}
	if cfg.NoTF32 {
		args = append(args, "--noTF32")
	}
	calib := spec.Calib
	if calib == "" {
		calib = cfg.Calib
	}
	if calib != "" {
		args = append(args, "--calib="+calib)
	}
	if cfg.WorkspaceMiB > 0 {
		args = append(args, "--memPoolSize=workspace:"+strconv.FormatInt(cfg.WorkspaceMiB, 10))
	}
	if cfg.OptLevel >= 0 {
		args = append(args, "--builderOptimizationLevel="+strconv.Itoa(cfg.OptLevel))
	}
	if spec.TimingCache != "" {
		args = append(args, "--timingCacheFile="+spec.TimingCache)
	}
	if spec.LayerInfo != "" {
		args = append(args, "--profilingVerbosity=detailed", "--exportLayerInfo="+spec.LayerInfo)
	}
	args = append(args, "--skipInference")
	if spec.Verbose {
		args = append(args, "--verbose")
	}
	return args, nil
}

// InputFile is one input of an inference run: its tensor name, the shape
// to run at and the raw little-endian file --loadInputs reads.
type InputFile struct {
	Name  string
	Shape []int64
	File  string
}

// RunSpec is an inference run that checks outputs: one query on real
// inputs, outputs exported as JSON.
type RunSpec struct {
	Engine       string
	Inputs       []InputFile
	ExportOutput string
	Verbose      bool
}

// RunArgs is the command line of one correctness run: the engine, the
// sample's shapes and data, one timed query without warm-up, and the
// outputs exported. Data transfers stay on (the default up to 10.x): the
// outputs must come back to the host.
func RunArgs(v Version, spec RunSpec) ([]string, error) {
	if err := supportedVersion(v); err != nil {
		return nil, err
	}
	if spec.Engine == "" || spec.ExportOutput == "" {
		return nil, fmt.Errorf("run command: the engine and the output file are required")
	}
	args := []string{"--loadEngine=" + spec.Engine}
	io, err := inputArgs(v, spec.Inputs)
	if err != nil {
		return nil, err
	}
	args = append(args, io...)
	args = append(args, "--warmUp=0", "--duration=0", "--iterations=1", "--exportOutput="+spec.ExportOutput)
	if spec.Verbose {
		args = append(args, "--verbose")
	}
	return args, nil
}

// BenchSpec is a timed run of one batch.
type BenchSpec struct {
	Engine      string
	Inputs      []InputFile
	ExportTimes string
	Rule        backend.StopRule
	Verbose     bool
}

// Benchmark warm-up bounds: trtexec's warm-up is a time, the stop rule's a
// number of calls. 500 ms is NVIDIA's own example (§1.6); a tenth of the
// time limit lets long measurements settle clocks for longer.
const (
	minWarmUp = 500 * time.Millisecond
	maxWarmUp = 5 * time.Second
)

// BenchArgs is the command line of one benchmark: the engine at the batch's
// shapes with its data, NVIDIA's stable settings (--noDataTransfers
// --useCudaGraph --useSpinWait, the defaults from 11 on, where the flags are
// deprecated no-ops), a warm-up, at least Rule.MinSamples queries and
// Rule.MaxTime of timing (trtexec runs until both are reached), and the
// per-query trace exported. The stop rule itself is applied to the trace
// afterwards, so results mean what they mean for every other backend.
func BenchArgs(v Version, spec BenchSpec) ([]string, error) {
	if err := supportedVersion(v); err != nil {
		return nil, err
	}
	if spec.Engine == "" || spec.ExportTimes == "" {
		return nil, fmt.Errorf("benchmark command: the engine and the times file are required")
	}
	if err := spec.Rule.Validate(); err != nil {
		return nil, err
	}
	args := []string{"--loadEngine=" + spec.Engine}
	io, err := inputArgs(v, spec.Inputs)
	if err != nil {
		return nil, err
	}
	args = append(args, io...)
	if v.Major < 11 {
		args = append(args, "--noDataTransfers", "--useCudaGraph", "--useSpinWait")
	}
	warm := time.Duration(0)
	if spec.Rule.Warmup > 0 {
		warm = min(max(spec.Rule.MaxTime/10, minWarmUp), maxWarmUp)
	}
	args = append(args,
		"--warmUp="+strconv.FormatInt(warm.Milliseconds(), 10),
		"--duration="+strconv.FormatFloat(spec.Rule.MaxTime.Seconds(), 'f', -1, 64),
		"--iterations="+strconv.Itoa(spec.Rule.MinSamples),
		"--exportTimes="+spec.ExportTimes)
	if spec.Verbose {
		args = append(args, "--verbose")
	}
	return args, nil
}

// profileArgs renders optimization profiles. One profile needs no
// --profile (every version accepts bare --minShapes/--optShapes/--maxShapes);
// several need 10.0+, each group right after its --profile=N, indices from 0.
func profileArgs(v Version, profiles []shapes.Profile) ([]string, error) {
	if len(profiles) == 0 {
		// trtexec would set every dynamic dimension to 1 and say so only in
		// a warning; a worker always passes explicit shapes.
		return nil, fmt.Errorf("build command: no optimization profile")
	}
	if len(profiles) > 1 && v.Major < 10 {
		return nil, fmt.Errorf("trtexec of TensorRT %s builds one optimization profile; %d were requested (several need TensorRT 10)", v, len(profiles))
	}
	var args []string
	for i, p := range profiles {
		if len(p.Inputs) == 0 {
			return nil, fmt.Errorf("optimization profile %d has no inputs", i)
		}
		var mins, opts, maxs []string
		for _, ip := range p.Inputs {
			if len(ip.Min) != len(ip.Opt) || len(ip.Min) != len(ip.Max) {
				return nil, fmt.Errorf("input %q: min, opt and max shapes have ranks %d, %d, %d", ip.Name, len(ip.Min), len(ip.Opt), len(ip.Max))
			}
			for k := range ip.Min {
				if !(ip.Min[k] <= ip.Opt[k] && ip.Opt[k] <= ip.Max[k]) {
					return nil, fmt.Errorf("input %q: axis %d has min %d, opt %d, max %d (want min ≤ opt ≤ max)", ip.Name, k, ip.Min[k], ip.Opt[k], ip.Max[k])
				}
			}
			for _, s := range [][]int64{ip.Min, ip.Opt, ip.Max} {
				if _, err := shapeValue(v, ip.Name, s); err != nil {
					return nil, err
				}
			}
			mn, _ := shapeValue(v, ip.Name, ip.Min)
			op, _ := shapeValue(v, ip.Name, ip.Opt)
			mx, _ := shapeValue(v, ip.Name, ip.Max)
			mins, opts, maxs = append(mins, mn), append(opts, op), append(maxs, mx)
		}
		if len(profiles) > 1 {
			args = append(args, "--profile="+strconv.Itoa(i))
		}
		args = append(args,
			"--minShapes="+strings.Join(mins, ","),
			"--optShapes="+strings.Join(opts, ","),
			"--maxShapes="+strings.Join(maxs, ","))
	}
	return args, nil
}

// inputArgs renders --shapes and --loadInputs for concrete inputs.
func inputArgs(v Version, inputs []InputFile) ([]string, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	var shp, load []string
	for _, in := range inputs {
		s, err := shapeValue(v, in.Name, in.Shape)
		if err != nil {
			return nil, err
		}
		shp = append(shp, s)
		if in.File == "" {
			return nil, fmt.Errorf("input %q has no data file", in.Name)
		}
		// The value is split at its last ':' too, and the list at every
		// ',': a file name with either cannot be given.
		if strings.ContainsAny(in.File, ",:'") {
			return nil, fmt.Errorf("input file %q for %q contains ',', ':' or a quote, which --loadInputs cannot express; use a path without them", in.File, in.Name)
		}
		load = append(load, in.Name+":"+in.File)
	}
	return []string{"--shapes=" + strings.Join(shp, ","), "--loadInputs=" + strings.Join(load, ",")}, nil
}

// shapeValue renders one "name:d0xd1x…" item of a shape list after checking
// the name against trtexec's list parser (§1.3, splitNameAndValue in 8.6.1
// and 10.16): the list is split at every ',' first, so a name with a comma
// cannot be written at all; each item is split at its last ':', so names
// with colons work as they are (--minShapes=x:0:1x1x28x28 is tensor "x:0");
// a quote switches to the 'name':value form, so a name with a quote cannot
// be written; from 10.0 a '*' in a name is a wildcard.
func shapeValue(v Version, name string, shape []int64) (string, error) {
	if err := CheckTensorName(v, name); err != nil {
		return "", err
	}
	for k, d := range shape {
		if d < 0 {
			return "", fmt.Errorf("input %q: axis %d is %d; trtexec shapes must be concrete", name, k, d)
		}
	}
	if len(shape) == 0 {
		if v.Major < 10 {
			return "", fmt.Errorf("input %q is a scalar; trtexec of TensorRT %s cannot give a 0-D shape (10.0 accepts %q)", name, v, name+":scalar")
		}
		return name + ":scalar", nil
	}
	return name + ":" + shapes.FormatShape(shape), nil
}

// CheckTensorName reports whether trtexec of version v can name a tensor
// in its shape and input flags (see shapeValue).
func CheckTensorName(v Version, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an input has an empty name; trtexec's shape flags cannot name it")
	case strings.Contains(name, ","):
		return fmt.Errorf("input %q contains a comma: trtexec splits --minShapes/--optShapes/--maxShapes/--shapes/--loadInputs at every comma before anything else, so this name cannot be expressed; rename the input in the ONNX model (e.g. with onnx-graphsurgeon)", name)
	case strings.Contains(name, "'"):
		return fmt.Errorf("input %q contains a single quote: trtexec reads quotes as its 'name':value form and strips them, so this name cannot be expressed; rename the input in the ONNX model", name)
	case strings.Contains(name, "*") && v.Major >= 10:
		return fmt.Errorf("input %q contains '*', which trtexec of TensorRT %s reads as a wildcard matching other inputs; rename the input in the ONNX model", name, v)
	}
	return nil
}
