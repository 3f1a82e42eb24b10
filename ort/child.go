package ort

import (
	"bufio"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	onnx "github.com/yalue/onnxruntime_go"

	"github.com/tunefleet/tunefleet/backend"
)

// ChildEnv marks a process started as a session child.
const ChildEnv = "TUNEFLEET_ORT_CHILD"

// MaybeServeChild turns this process into a session child when it was
// started as one, and exits when the parent is done with it. Otherwise it
// returns at once. Call it first thing in main and in TestMain.
func MaybeServeChild() {
	if os.Getenv(ChildEnv) != "1" {
		return
	}
	os.Exit(serveChild(os.Stdin, os.Stdout))
}

// serveChild answers requests until close or end of input. The protocol
// owns the original stdout; fd 1 is pointed at stderr so that anything ONNX
// Runtime or a library prints cannot corrupt the stream.
func serveChild(in io.Reader, out *os.File) int {
	protoFD, err := syscall.Dup(int(out.Fd()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ort child: dup stdout:", err)
		return 2
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		fmt.Fprintln(os.Stderr, "ort child: redirect stdout:", err)
		return 2
	}
	w := bufio.NewWriter(os.NewFile(uintptr(protoFD), "protocol"))
	enc := gob.NewEncoder(w)
	dec := gob.NewDecoder(bufio.NewReader(in))
	// ORT's thread pools and the timing loop behave best when the calling
	// goroutine does not migrate between OS threads.
	runtime.LockOSThread()
	var s *session
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if err == io.EOF {
				return 0
			}
			fmt.Fprintln(os.Stderr, "ort child: read request:", err)
			return 2
		}
		decodeOuts(req.Outs, req.OutRank0)
		var resp response
		switch req.Op {
		case opBuild:
			s, resp = build(req)
		case opRun:
			resp = s.run(req)
		case opBench:
			report, stop := reportCalls(enc, w, req.Progress)
			resp = s.bench(req, report)
			stop()
		case opClose:
			s.close()
			return 0
		default:
			resp = response{Err: fmt.Sprintf("unknown op %q", req.Op), ErrClass: backend.FailInfrastructure}
		}
		if err := enc.Encode(&resp); err != nil {
			fmt.Fprintln(os.Stderr, "ort child: write response:", err)
			return 2
		}
		if err := w.Flush(); err != nil {
			return 2
		}
	}
}

type session struct {
	s       *onnx.DynamicAdvancedSession
	inNames []string
}

func failResp(class backend.FailureClass, format string, args ...any) response {
	return response{Err: fmt.Sprintf(format, args...), ErrClass: class}
}

func build(req request) (*session, response) {
	if !onnx.IsInitialized() {
		onnx.SetSharedLibraryPath(req.Library)
		if err := onnx.InitializeEnvironment(onnx.WithLogLevelWarning()); err != nil {
			return nil, failResp(backend.FailInfrastructure, "load ONNX Runtime from %s: %v", req.Library, err)
		}
		onnx.DisableTelemetry()
	}
	opts, err := sessionOptions(req)
	if err != nil {
		return nil, failResp(backend.FailBuild, "session options: %v", err)
	}
	defer opts.Destroy()
	s, err := onnx.NewDynamicAdvancedSession(req.ONNXPath, req.InputNames, req.OutputNames, opts)
	if err != nil {
		return nil, failResp(backend.FailBuild, "create session: %v", err)
	}
	info := map[string]string{
		"ort_version":  onnx.GetVersion(),
		"optimization": req.Config.Level,
		"intra_op":     fmt.Sprint(req.Config.IntraThreads),
		"inter_op":     fmt.Sprint(req.Config.InterThreads),
		"spinning":     fmt.Sprint(req.Config.Spinning),
		"cpu":          cpuModel(),
		"goarch":       runtime.GOARCH,
	}
	return &session{s: s, inNames: req.InputNames}, response{Info: info}
}

func sessionOptions(req request) (*onnx.SessionOptions, error) {
	o, err := onnx.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	level := map[string]onnx.GraphOptimizationLevel{
		"disabled": onnx.GraphOptimizationLevelDisableAll,
		"basic":    onnx.GraphOptimizationLevelEnableBasic,
		"extended": onnx.GraphOptimizationLevelEnableExtended,
		"all":      onnx.GraphOptimizationLevelEnableAll,
	}[req.Config.Level]
	spin := "0"
	if req.Config.Spinning {
		spin = "1"
	}
	steps := []func() error{
		func() error { return o.SetGraphOptimizationLevel(level) },
		func() error { return o.SetIntraOpNumThreads(req.Config.IntraThreads) },
		func() error { return o.SetInterOpNumThreads(req.Config.InterThreads) },
		func() error { return o.AddSessionConfigEntry("session.intra_op.allow_spinning", spin) },
		func() error { return o.AddSessionConfigEntry("session.inter_op.allow_spinning", spin) },
	}
	if req.OptimizedPath != "" {
		steps = append(steps, func() error { return o.SetOptimizedModelFilePath(req.OptimizedPath) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			o.Destroy()
			return nil, err
		}
	}
	return o, nil
}

// bind creates the ORT values of one call; release frees them.
func bind(req request) (ins, outs []*boundValue, release func(), err error) {
	release = func() {
		for _, v := range append(ins, outs...) {
			v.destroy()
		}
	}
	for _, t := range req.Inputs {
		v, err := newInput(t)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		ins = append(ins, v)
	}
	for _, o := range req.Outs {
		v, err := newOutput(o)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		outs = append(outs, v)
	}
	return ins, outs, release, nil
}

func values(bs []*boundValue) []onnx.Value {
	out := make([]onnx.Value, len(bs))
	for i, b := range bs {
		if b != nil {
			out[i] = b.value
		}
	}
	return out
}

func (s *session) run(req request) response {
	if s == nil {
		return failResp(backend.FailInfrastructure, "run before build")
	}
	ins, outs, release, err := bind(req)
	if err != nil {
		return failResp(backend.FailRuntime, "%v", err)
	}
	defer release()
	outVals := values(outs)
	if err := s.s.Run(values(ins), outVals); err != nil {
		return failResp(backend.FailRuntime, "%v", err)
	}
	var resp response
	for i, o := range req.Outs {
		b := outs[i]
		if b == nil {
			// ORT allocated it; Run stored it in outVals.
			b = &boundValue{value: outVals[i]}
			defer b.destroy()
		}
		t, err := b.read(o.Name)
		if err != nil {
			return failResp(backend.FailRuntime, "%v", err)
		}
		resp.Outputs = append(resp.Outputs, t)
	}
	return resp
}

// bench times Run with values bound once, exactly as a bare onnxruntime_go
// loop would: only the Run call is inside the timed region. progress hears
// the timed calls so far (nil: nobody asked).
func (s *session) bench(req request, progress backend.CallProgress) response {
	if s == nil {
		return failResp(backend.FailInfrastructure, "benchmark before build")
	}
	ins, outs, release, err := bind(req)
	if err != nil {
		return failResp(backend.FailRuntime, "%v", err)
	}
	defer release()
	inVals, outVals := values(ins), values(outs)
	fresh := make([]onnx.Value, len(outVals))
	run := func() (time.Duration, error) {
		copy(fresh, outVals)
		start := time.Now()
		err := s.s.Run(inVals, fresh)
		d := time.Since(start)
		if err != nil {
			// What a failed Run left in fresh is not a value to free (it
			// can be a nil pointer inside a non-nil interface).
			return d, err
		}
		for i, v := range fresh {
			if outVals[i] == nil && v != nil {
				v.Destroy() // runtime-allocated output of this call
			}
		}
		return d, nil
	}
	ctx := context.Background()
	if progress != nil {
		ctx = backend.WithCallProgress(ctx, progress)
	}
	st, err := backend.Measure(ctx, req.Rule, req.BatchSize, run)
	if err != nil {
		return failResp(backend.FailRuntime, "benchmark at batch %d: %v", req.BatchSize, err)
	}
	return response{Stats: st}
}

// progressEvery is how often a benchmark's child reports its calls.
const progressEvery = 250 * time.Millisecond

// reportCalls returns what the timing loop calls after each timed call
// when the parent asked for progress (want), and a stop that must be
// called before the final response is written. The loop only stores the
// count; a ticker goroutine writes the partial responses, so that no pipe
// write happens on the timing loop's thread and at most one every
// progressEvery happens at all.
func reportCalls(enc *gob.Encoder, w *bufio.Writer, want bool) (backend.CallProgress, func()) {
	if !want {
		return nil, func() {}
	}
	var calls atomic.Int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		sent := int64(0)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if n := calls.Load(); n != sent {
					sent = n
					// A failed write shows again, and is reported, with
					// the final response.
					if enc.Encode(&response{Partial: true, Calls: int(n)}) != nil || w.Flush() != nil {
						return
					}
				}
			}
		}
	}()
	return func(n int) { calls.Store(int64(n)) }, func() { close(done); <-stopped }
}

func (s *session) close() {
	if s != nil && s.s != nil {
		s.s.Destroy()
	}
}

// cpuModel reads the CPU's model name (Linux), for the record.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
