package trt

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/tunefleet/tunefleet/backend"
)

// Stage is what a trtexec invocation was for; it decides whether a
// deterministic failure is a build or a runtime failure, and whether a
// performance summary was expected.
type Stage string

// Stages.
const (
	StageVersion   Stage = "version"   // trtexec --help
	StageBuild     Stage = "build"     // --onnx … --saveEngine … --skipInference
	StageRun       Stage = "run"       // --loadEngine … --exportOutput (correctness)
	StageBenchmark Stage = "benchmark" // --loadEngine … --exportTimes, or a build that also benchmarks
	StageAuto      Stage = ""          // infer from the command line in the log
)

// InferStage guesses the stage of a log from its echoed command line: what
// `worker trt-log` does with a log of unknown origin.
func InferStage(l *Log) Stage {
	args := strings.Fields(l.Command)
	has := func(prefix string) bool {
		for _, a := range args {
			if a == prefix || strings.HasPrefix(a, prefix+"=") {
				return true
			}
		}
		return false
	}
	switch {
	case l.Command == "" && !l.Running:
		return StageBuild
	case has("--help") || has("-h"):
		return StageVersion
	case has("--skipInference") || has("--buildOnly"):
		return StageBuild
	case has("--loadEngine") && has("--exportOutput"):
		return StageRun
	}
	// A build without --skipInference benchmarks too, as does --loadEngine.
	return StageBenchmark
}

// Failure kinds: what the classifier recognised.
const (
	KindOK               = "ok"
	KindTimeout          = "timeout"
	KindCancelled        = "cancelled"
	KindNoDevice         = "no-device"
	KindDriver           = "driver"
	KindLibraryMissing   = "library-missing"
	KindVersion          = "unsupported-trt-version"
	KindCUDAError        = "cuda-error"
	KindCrash            = "crash"
	KindHostOOM          = "host-oom-or-killed"
	KindBadOption        = "bad-option"
	KindPluginNotFound   = "plugin-not-found"
	KindUnsupportedOp    = "unsupported-op"
	KindONNXParse        = "onnx-parse"
	KindBuildOOM         = "build-oom"
	KindBuild            = "build-failed"
	KindUnsupported      = "unsupported-on-device"
	KindShape            = "shape-or-input"
	KindEngineMismatch   = "engine-incompatible"
	KindRuntimeOOM       = "runtime-oom"
	KindInference        = "inference-failed"
	KindException        = "uncaught-exception"
	KindAssertion        = "assertion"
	KindSaveFailed       = "save-failed"
	KindNoSummary        = "no-summary"
	KindFailedNoDetail   = "failed-without-detail"
	KindNoResult         = "no-result-line"
	KindExitWithoutError = "nonzero-exit"
)

// Classification is what a trtexec log and exit status mean for the queue
// (trtexec-nvml.md §3.3): success, a permanent failure of this candidate
// (skip retries), a retryable one, or a broken worker (requeue the work
// elsewhere and stop taking work until the GPU checks out again).
type Classification struct {
	OK bool `json:"ok"`
	// Class is the backend failure class; build and runtime are
	// permanent, timeout and infrastructure retryable. Empty when OK.
	Class        backend.FailureClass `json:"class,omitempty"`
	Retryable    bool                 `json:"retryable"`
	BrokenWorker bool                 `json:"broken_worker"`
	Kind         string               `json:"kind"`
	// Reason is one sentence for tables and messages.
	Reason string `json:"reason"`
	// Op is the offending ONNX operator, when a parse failure names it.
	Op string `json:"op,omitempty"`
	// Evidence are the log lines the decision rests on, first the most
	// telling.
	Evidence []string `json:"evidence,omitempty"`
}

// InferExit derives an exit status from the log alone: PASSED is exit 0,
// FAILED exit 1 (reportPass/reportFail), anything else unknown.
func InferExit(l *Log) ExitStatus {
	switch l.Status {
	case "PASSED":
		return ExitStatus{Code: 0}
	case "FAILED":
		return ExitStatus{Code: 1}
	}
	return ExitStatus{Code: -1, Unknown: true}
}

func has(hay []string, needles ...string) (string, bool) {
	for _, h := range hay {
		lh := strings.ToLower(h)
		for _, n := range needles {
			if strings.Contains(lh, n) {
				return firstLine(h), true
			}
		}
	}
	return "", false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(strings.TrimSpace(s), 400)
}

// Evidence groups, lower case. Sources: trtexec-nvml.md §3.1-3.2 and the
// fixtures.
var (
	noDevice = []string{"no cuda-capable device is detected", "cannot find any available devices", "cannot find device id", "all cuda-capable devices are busy or unavailable"}
	driver   = []string{"cuda driver version is insufficient", "driver version is insufficient", "cuda initialization failure", "failed to initialize cuda", "gpu is lost", "fallen off the bus", "uncorrectable ecc error"}
	library  = []string{"error while loading shared libraries", "could not load library"}
	cudaBad  = []string{"an illegal memory access was encountered", "unspecified launch failure", "misaligned address", "cuda failure"}
	oomBuild = []string{"error code 2: outofmemory", "outofmemory", "could not be allocated", "insufficient memory"}
	oomCUDA  = []string{"out of memory"}
	badOpt   = []string{"unknown option:", "cannot be both set", "aren't allowed to be enabled together", "found invalid number of '", "without --profile are not allowed", "unknown memory pool", "negative memory pool size", "invalid or missing shape spec", "invalid usage"}
	plugin   = []string{"plugin not found"}
	noImp    = []string{"no importer registered for op"}
	parse    = []string{"failed to parse onnx file", "parsing model failed", "modelimporter.cpp", "onnx2trt"}
	shape    = []string{"cannot find input tensor with name", "invalid tensor names found", "required optimization profile is invalid", "unexpected file size for input file", "set optimization profile failed", "is out of the range of the optimization profile", "shape tensor is provided", "the number of elements in"}
	mismatch = []string{"serialization assertion", "engine deserialization failed", "incompatible serialization version", "not compatible with this version of tensorrt", "generated on an incompatible device", "failed to verify a plan tag", "error opening engine file"}
	buildFl  = []string{"engine could not be created from network", "building engine failed", "could not find any implementation for node", "error code 4: api usage error", "error code 10: internal error", "error code 9:", "failed to create engine from model or file", "engine set up failed"}
	unsup    = []string{"not supported on this", "does not support", "hardware doesn't support", "platform doesn't support", "no implementation obeys reformatting-free rules"}
	infer    = []string{"unable to create execution context", "inference set up failed", "error occurred during inference"}
	except   = []string{"uncaught exception detected"}
	assert   = []string{"assertion failure"}
	save     = []string{"saving engine to file failed"}
)

// Classify decides what a finished trtexec invocation means. Exit status
// first (timeouts, signals, the dynamic loader's 127), then the log's
// evidence from the most specific to the most general; a FAILED run with no
// error text at all (stderr lost, as in the 8.2 fixture) is still a
// permanent failure of the stage, decided by the exit code alone.
func Classify(l *Log, st ExitStatus, stage Stage) Classification {
	if l == nil {
		l = &Log{}
	}
	if stage == StageAuto {
		stage = InferStage(l)
	}
	c := newClassifier(l, st, stage)
	// Exit status first: what we did to the process, what the kernel did.
	if r, ok := c.byExit(); ok {
		return r
	}
	if st.Success() && l.Status != "FAILED" {
		return classifySuccess(l, stage, c.stageClass, c.mk)
	}
	// Then the machine's problems (the same failure would hit every
	// candidate here), then the candidate's own, then what is left.
	if r, ok := c.machine(); ok {
		return r
	}
	if r, ok := c.candidate(); ok {
		return r
	}
	return c.unexplained()
}

// classifier holds one log's evidence while Classify walks its rules.
type classifier struct {
	l          *Log
	st         ExitStatus
	stage      Stage
	stageClass backend.FailureClass
	// Where the reasons are: error lines (with their continuations), the
	// unprefixed tail (fatal messages printed outside the logger), and the
	// warnings (OOM hints); all is errs then warnings.
	errs, all []string
}

func newClassifier(l *Log, st ExitStatus, stage Stage) *classifier {
	errs := append(append(append([]string{}, l.Errors...), l.Fatal...), l.Unprefixed...)
	all := append([]string{}, errs...)
	for _, w := range l.Warnings {
		all = append(all, w.Text)
	}
	return &classifier{l: l, st: st, stage: stage, stageClass: stageClassOf(l, stage), errs: errs, all: all}
}

// mk builds a Classification; empty evidence lines are dropped.
func (c *classifier) mk(class backend.FailureClass, broken bool, kind, reason string, ev ...string) Classification {
	r := Classification{Class: class, Retryable: class.Retryable(), BrokenWorker: broken, Kind: kind, Reason: reason}
	for _, e := range ev {
		if e != "" {
			r.Evidence = append(r.Evidence, e)
		}
	}
	return r
}

// byExit: trtexec killed by us, for time or for a cancel.
func (c *classifier) byExit() (Classification, bool) {
	switch {
	case c.st.TimedOut:
		return c.mk(backend.FailTimeout, false, KindTimeout, fmt.Sprintf("trtexec %s ran past its time limit and was killed", c.stage), lastProgress(c.l)), true
	case c.st.Cancelled:
		return c.mk(backend.FailInfrastructure, false, KindCancelled, "trtexec was killed because the work was cancelled"), true
	}
	return Classification{}, false
}

// machine: no GPU, driver, libraries, memory, an unhealthy GPU, the host's
// OOM killer. Retryable elsewhere; some mark the worker broken.
func (c *classifier) machine() (Classification, bool) {
	if e, ok := has(c.all, noDevice...); ok {
		return c.mk(backend.FailInfrastructure, true, KindNoDevice, "trtexec sees no usable GPU", e), true
	}
	if e, ok := has(c.all, driver...); ok {
		return c.mk(backend.FailInfrastructure, true, KindDriver, "the GPU driver or CUDA failed to initialise", e), true
	}
	if e, ok := has(c.all, library...); ok || c.st.Code == 127 {
		if !ok {
			e = "exit status 127"
		}
		return c.mk(backend.FailInfrastructure, true, KindLibraryMissing, "trtexec could not load the TensorRT/CUDA libraries", e), true
	}
	// Out of memory: another tenant or a too-large workspace; retryable.
	if e, ok := has(c.errs, oomCUDA...); ok {
		if c.stage == StageBuild {
			return c.mk(backend.FailInfrastructure, false, KindBuildOOM, "the build ran out of GPU memory (retry once on a free GPU, or give a smaller workspace)", e), true
		}
		return c.mk(backend.FailInfrastructure, false, KindRuntimeOOM, "the GPU ran out of memory while running the engine (shared GPU?)", e), true
	}
	if e, ok := has(c.errs, cudaBad...); ok {
		if _, oom := has([]string{e}, oomCUDA...); !oom {
			return c.mk(backend.FailInfrastructure, true, KindCUDAError, "a CUDA call failed (illegal access, launch failure): the GPU may be unhealthy", e), true
		}
	}
	if c.st.Signal == syscall.SIGKILL {
		return c.mk(backend.FailInfrastructure, false, KindHostOOM, "trtexec was killed (SIGKILL): host memory exhausted or an external kill; retry with less concurrency", lastProgress(c.l)), true
	}
	return Classification{}, false
}

// candidate: what is wrong with this model or this configuration —
// permanent, except a stale engine or a full disk.
func (c *classifier) candidate() (Classification, bool) {
	if r, ok := c.parser(); ok {
		return r, true
	}
	errs := c.errs
	if e, ok := has(errs, shape...); ok {
		return c.mk(c.stageClass, false, KindShape, "shapes or input data do not fit the engine (tensor names, profile ranges, file sizes)", e), true
	}
	if e, ok := has(errs, mismatch...); ok {
		// The engine was built moments ago by the same trtexec: a mismatch
		// means a stale or foreign plan, which a rebuild fixes.
		return c.mk(backend.FailInfrastructure, false, KindEngineMismatch, "the engine file does not match this TensorRT or GPU; rebuild it", e), true
	}
	if e, ok := has(errs, buildFl...); ok {
		if oe, oom := has(c.all, oomBuild...); oom {
			return c.mk(backend.FailInfrastructure, false, KindBuildOOM, "the build ran out of GPU memory (retry once on a free GPU, or give a smaller workspace)", oe, e), true
		}
		if ue, u := has(errs, unsup...); u {
			return c.mk(backend.FailBuild, false, KindUnsupported, "the GPU or TensorRT does not support what the candidate asks for", ue, e), true
		}
		return c.mk(backend.FailBuild, false, KindBuild, "TensorRT could not build an engine for this configuration", firstErrorCode(errs), e), true
	}
	if e, ok := has(errs, save...); ok {
		return c.mk(backend.FailInfrastructure, false, KindSaveFailed, "trtexec could not write the engine file (disk?)", e), true
	}
	if e, ok := has(errs, infer...); ok {
		return c.mk(backend.FailRuntime, false, KindInference, "the engine could not run", firstErrorCode(errs), e), true
	}
	if e, ok := has(errs, except...); ok {
		return c.mk(c.stageClass, false, KindException, "trtexec stopped on an uncaught exception", e), true
	}
	if e, ok := has(errs, assert...); ok {
		return c.mk(c.stageClass, false, KindAssertion, "trtexec stopped on a failed assertion", e), true
	}
	if e, ok := has(errs, oomBuild...); ok {
		return c.mk(backend.FailInfrastructure, false, KindBuildOOM, "trtexec ran out of GPU memory", e), true
	}
	return Classification{}, false
}

// parser: trtexec's options and the ONNX parser (plugins, importers,
// parse errors), naming the operator where the log does.
func (c *classifier) parser() (Classification, bool) {
	errs := c.errs
	if e, ok := has(c.l.Errors, badOpt...); ok {
		return c.mk(backend.FailBuild, false, KindBadOption, "trtexec rejected an option: the command builder and this TensorRT version disagree", e), true
	}
	if e, ok := has(errs, plugin...); ok {
		r := c.mk(backend.FailBuild, false, KindPluginNotFound, "the ONNX model uses an operator with no TensorRT plugin", e)
		r.Op = parseNodeOp(errs)
		if r.Op != "" {
			r.Reason = fmt.Sprintf("ONNX operator %s has no TensorRT plugin (unsupported custom op)", r.Op)
		}
		r.Evidence = appendParseChain(r.Evidence, errs)
		return r, true
	}
	if e, ok := has(errs, noImp...); ok {
		r := c.mk(backend.FailBuild, false, KindUnsupportedOp, "TensorRT has no importer for an ONNX operator", e)
		r.Op = opAfter(e, "no importer registered for op: ")
		if r.Op == "" {
			r.Op = parseNodeOp(errs)
		}
		if r.Op != "" {
			r.Reason = fmt.Sprintf("TensorRT cannot import ONNX operator %s", r.Op)
		}
		return r, true
	}
	if e, ok := has(errs, parse...); ok {
		r := c.mk(backend.FailBuild, false, KindONNXParse, "TensorRT's ONNX parser rejected the model", e)
		r.Op = parseNodeOp(errs)
		r.Evidence = appendParseChain(r.Evidence, errs)
		return r, true
	}
	return Classification{}, false
}

// unexplained: no rule matched; the signal, the result line and the exit
// status say what they can.
func (c *classifier) unexplained() Classification {
	l, st := c.l, c.st
	if st.Signal != 0 {
		// SIGABRT (8.6's abort() on a CUDA failure), SIGSEGV: without a CUDA
		// error in the log, a crash of TensorRT or a plugin on this model.
		return c.mk(c.stageClass, false, KindCrash, fmt.Sprintf("trtexec crashed (%s)", st.Signal), lastError(l), lastProgress(l))
	}
	if l.Status == "FAILED" {
		e := lastError(l)
		if e == "" {
			// The 8.2 fixture: [E] lines went to an uncaptured stderr.
			return c.mk(c.stageClass, false, KindFailedNoDetail, "trtexec reported FAILED without an error message (its stderr was not captured?)", "&&&& FAILED", lastProgress(l))
		}
		return c.mk(c.stageClass, false, KindBuild, "trtexec reported FAILED", e)
	}
	if st.Unknown {
		if !l.Running {
			return c.mk(backend.FailInfrastructure, false, KindNoResult, "the log has no trtexec output")
		}
		return c.mk(backend.FailInfrastructure, false, KindNoResult, "the log ends without a result line (killed, crashed or truncated)", lastError(l), lastProgress(l))
	}
	// Exit 1 from 10.x's exit() paths without a result line and without a
	// recognised message: unknown, so not the candidate's fault.
	return c.mk(backend.FailInfrastructure, false, KindExitWithoutError, fmt.Sprintf("trtexec ended with %s and no result line", st), lastError(l), lastProgress(l))
}

// stageClassOf is the class of a deterministic failure at this point: a
// build failure when the stage is a build, or when a build-and-benchmark
// run (--onnx without --skipInference) failed before it had an engine.
func stageClassOf(l *Log, stage Stage) backend.FailureClass {
	if stage == StageBuild || stage == StageVersion {
		return backend.FailBuild
	}
	m := l.Milestones
	built := m.EngineBuiltS > 0 || m.EngineSizeMiB > 0 || m.LoadedEngineMiB > 0 || m.DeserializeS > 0 || m.InferenceStarted
	if stage == StageBenchmark && strings.Contains(l.Command, "--onnx=") && !built {
		return backend.FailBuild
	}
	return backend.FailRuntime
}

type mkFunc func(class backend.FailureClass, broken bool, kind, reason string, ev ...string) Classification

// classifySuccess checks that a clean exit delivered what the stage needs.
func classifySuccess(l *Log, stage Stage, stageClass backend.FailureClass, mk mkFunc) Classification {
	ok := Classification{OK: true, Kind: KindOK, Reason: "trtexec PASSED"}
	switch {
	case stage == StageVersion:
		if l.Running {
			return ok
		}
	case l.Status != "PASSED":
		return mk(backend.FailInfrastructure, false, KindNoResult, "trtexec exited 0 without a PASSED line (truncated log?)", lastProgress(l))
	case stage == StageBenchmark && l.Summary == nil:
		if l.SummaryOmitted {
			return mk(backend.FailRuntime, false, KindNoSummary, "trtexec PASSED but printed no performance summary: a profiler was attached (--dumpProfile/--exportProfile without --separateProfileRun), so there is no benchmark result", "The e2e network timing is not reported")
		}
		return mk(backend.FailRuntime, false, KindNoSummary, "trtexec PASSED but printed no performance summary, so there is no benchmark result", lastProgress(l))
	default:
		return ok
	}
	return mk(backend.FailInfrastructure, false, KindNoResult, "trtexec --help printed no banner")
}

// parseNodeOp reads the operator of "While parsing node number 0
// [AddScalar -> "out"]:".
func parseNodeOp(errs []string) string {
	for _, e := range errs {
		i := strings.Index(e, "While parsing node number ")
		if i < 0 {
			continue
		}
		rest := e[i:]
		a := strings.IndexByte(rest, '[')
		if a < 0 {
			continue
		}
		op := rest[a+1:]
		if j := strings.Index(op, " -> "); j >= 0 {
			op = op[:j]
		} else if j := strings.IndexByte(op, ']'); j >= 0 {
			op = op[:j]
		}
		op = strings.TrimSpace(op)
		if op != "" && len(op) < 200 {
			return op
		}
	}
	return ""
}

// opAfter reads the operator name after a marker ("... op: Foo").
func opAfter(line, marker string) string {
	i := strings.Index(strings.ToLower(line), marker)
	if i < 0 {
		return ""
	}
	f := strings.Fields(line[i+len(marker):])
	if len(f) == 0 {
		return ""
	}
	return strings.Trim(f[0], `"'.,`)
}

// appendParseChain adds the node line and trtexec's own summary of a parse
// failure to the evidence.
func appendParseChain(ev, errs []string) []string {
	for _, e := range errs {
		if strings.Contains(e, "While parsing node number") || strings.Contains(e, "Failed to parse onnx file") {
			ev = append(ev, firstLine(e))
		}
	}
	return ev
}

// firstErrorCode returns the first "Error Code N: …" line, TensorRT's own
// statement of what went wrong.
func firstErrorCode(errs []string) string {
	for _, e := range errs {
		if strings.Contains(e, "Error Code ") {
			return firstLine(e)
		}
	}
	return ""
}

func lastError(l *Log) string {
	if len(l.Errors) > 0 {
		return firstLine(l.Errors[len(l.Errors)-1])
	}
	return ""
}

// lastProgress names how far trtexec got, for failures without a message.
func lastProgress(l *Log) string {
	m := l.Milestones
	switch {
	case l.Trace != nil:
		return "it had finished timing"
	case m.InferenceStarted:
		return "it had started inference"
	case m.DeserializeS > 0 || m.LoadedEngineMiB > 0:
		return "it had loaded the engine"
	case m.EngineBuiltS > 0:
		return "it had built the engine"
	case m.ParseFinished:
		return "it had parsed the model and was building"
	case l.VersionLine != "":
		return "it had started (TensorRT " + l.VersionLine + ")"
	case l.Running:
		return "it had printed its banner"
	}
	return ""
}

// Error is a trtexec invocation that failed, with the classification and
// the log it was made from. Backend methods return it wrapped in a
// *backend.Failure carrying Classification.Class.
type Error struct {
	Stage          Stage
	Exit           ExitStatus
	Classification Classification
	LogPath        string
}

// FailureKind is the classifier's kind, recorded with the failure so that
// the queue can treat some kinds specially (out of memory: retry once).
func (e *Error) FailureKind() string { return e.Classification.Kind }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trtexec %s failed (%s): %s", e.Stage, e.Classification.Kind, e.Classification.Reason)
	if len(e.Classification.Evidence) > 0 {
		fmt.Fprintf(&b, ": %s", e.Classification.Evidence[0])
	}
	if !e.Exit.Success() && !e.Exit.Unknown {
		fmt.Fprintf(&b, " [%s]", e.Exit)
	}
	if e.LogPath != "" {
		fmt.Fprintf(&b, " (log: %s)", e.LogPath)
	}
	return b.String()
}

// IsBrokenWorker reports whether err says the worker itself is broken (no
// GPU, driver or CUDA failure, TensorRT libraries missing): the work should
// go to another worker and this one should stop taking work.
func IsBrokenWorker(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Classification.BrokenWorker
}
