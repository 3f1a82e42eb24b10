package jobs

import (
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/tuner"
)

func TestRanOutOfMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kinds []string
		want  bool
	}{
		{nil, false},
		{[]string{"plugin-not-found"}, false},
		{[]string{"", "build-oom"}, true},
		{[]string{"runtime-oom"}, true},
		{[]string{"host-oom-or-killed"}, false}, // a kill may be the worker's, not the engine's
	} {
		res := &tuner.Result{}
		for _, k := range tc.kinds {
			res.Results = append(res.Results, backend.CandidateResult{Status: backend.StatusFailed, Failure: &backend.FailureInfo{Class: backend.FailInfrastructure, Kind: k}})
		}
		if got := ranOutOfMemory(res); got != tc.want {
			t.Errorf("kinds %v: got %v, want %v", tc.kinds, got, tc.want)
		}
	}
}
