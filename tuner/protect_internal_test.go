package tuner

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
)

// A panic in a candidate's build, check or benchmark becomes that
// candidate's build failure, with the panic value and the stack in its
// message; the worker carries on.
func TestRecoverCandidate(t *testing.T) {
	c, _ := backend.ParseCandidates("ort:cpu:basic")
	var log strings.Builder
	logf := func(f string, args ...any) { log.WriteString(f) }
	var nilMap map[string]int
	cr := recoverCandidate(c[0], func() backend.CandidateResult {
		nilMap["x"] = 1 // a real runtime panic: assignment to entry in nil map
		return backend.CandidateResult{}
	}, logf)
	if cr.Status != backend.StatusFailed || cr.Failure == nil || cr.Failure.Class != backend.FailBuild {
		t.Fatalf("result %+v, want a build failure", cr)
	}
	for _, want := range []string{"panic: assignment to entry in nil map", "TestRecoverCandidate"} {
		if !strings.Contains(cr.Failure.Message, want) {
			t.Errorf("message does not contain %q:\n%s", want, cr.Failure.Message)
		}
	}
	if cr.Candidate != "ort:cpu:basic" || log.Len() == 0 {
		t.Errorf("candidate %q, log %q", cr.Candidate, log.String())
	}
	ok := recoverCandidate(c[0], func() backend.CandidateResult {
		return backend.CandidateResult{Candidate: "x", Status: backend.StatusPassed}
	}, logf)
	if ok.Status != backend.StatusPassed {
		t.Errorf("a candidate that does not panic: %+v", ok)
	}
}
