package backend

import (
	"context"
	"errors"
	"fmt"
)

// FailureClass says why a candidate failed, and so what a queue should do
// with it: build, runtime, wrong-answer and unavailable failures are
// deterministic (a retry gives the same result), timeouts and
// infrastructure failures are not.
type FailureClass string

// The failure classes, as recorded in result.json.
const (
	FailBuild          FailureClass = "build"          // the engine could not be built (unsupported op, bad option, …)
	FailRuntime        FailureClass = "runtime"        // the engine built but running it failed or crashed
	FailWrongAnswer    FailureClass = "wrong_answer"   // outputs disagree with the reference outputs
	FailTimeout        FailureClass = "timeout"        // a build or run took longer than allowed
	FailInfrastructure FailureClass = "infrastructure" // the machine, not the candidate: missing library, disk, I/O
	// FailUnavailable: this platform cannot run the candidate at all (no
	// trtexec, no usable or no supported TensorRT). Not retryable: a run is
	// bound to one platform, so a retry would find the same; and not the
	// worker's breakage either, so its other candidates and tasks go on.
	FailUnavailable FailureClass = "unavailable"
)

// Retryable reports whether a failure of this class may go away on retry.
func (c FailureClass) Retryable() bool {
	return c == FailTimeout || c == FailInfrastructure
}

// Failure is an error with a failure class and the operation that failed.
type Failure struct {
	Class FailureClass
	Op    string // "build", "run", "check", "benchmark", …
	Err   error
}

func (f *Failure) Error() string {
	// The class is structure (FailureInfo.Class, table columns), not text:
	// repeating it in every wrapped message only adds noise.
	if f.Op == "" {
		return f.Err.Error()
	}
	return f.Op + ": " + f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

// Fail wraps err as a failure of the given class.
func Fail(class FailureClass, op string, err error) *Failure {
	return &Failure{Class: class, Op: op, Err: err}
}

// Failf builds a failure from a format string.
func Failf(class FailureClass, op, format string, args ...any) *Failure {
	return &Failure{Class: class, Op: op, Err: fmt.Errorf(format, args...)}
}

// ClassOf returns the failure class of err: the class of the outermost
// Failure it wraps, timeout for an expired context deadline, and otherwise
// the fallback.
func ClassOf(err error, fallback FailureClass) FailureClass {
	var f *Failure
	if errors.As(err, &f) {
		return f.Class
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return FailTimeout
	}
	return fallback
}

func asFailure(err error, f **Failure) bool { return errors.As(err, f) }
