package tuner

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
)

// maxStackLines bounds the stack kept in a panicking candidate's message:
// enough to find the frame, short enough for result.json and a log line.
const maxStackLines = 16

// protected runs one candidate, turning a panic in its build, check or
// benchmark into that candidate's failure (class build: it comes from the
// input the candidate was given, and happens again on retry) so that the
// worker, and the other candidates, carry on.
func (t *graphTuner) protected(ctx context.Context, idx int, c backend.Candidate) (b *built) {
	b = &built{c: c}
	b.cr = recoverCandidate(c, func() backend.CandidateResult {
		b = t.candidate(ctx, idx, c)
		return b.cr
	}, t.logf)
	return b // after a panic, the first b: no engine, a failed result
}

// recoverCandidate calls run and converts a panic into a failed result
// whose message holds the panic value and the top of the stack.
func recoverCandidate(c backend.Candidate, run func() backend.CandidateResult, logf func(string, ...any)) (cr backend.CandidateResult) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		err := fmt.Errorf("panic: %v\n%s", v, shortStack(debug.Stack()))
		cr = backend.CandidateResult{Candidate: c.String(), Status: backend.StatusFailed,
			Failure: backend.InfoOf(backend.Fail(backend.FailBuild, "", err), backend.FailBuild)}
		logf("%s: failed (panic): %v", c, v)
	}()
	return run()
}

// shortStack keeps the first frames of a goroutine stack.
func shortStack(stack []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
	if len(lines) > maxStackLines {
		lines = append(lines[:maxStackLines], "…")
	}
	return strings.Join(lines, "\n")
}
