package jobs

import (
	"fmt"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

func TestDropLosingEngines(t *testing.T) {
	t.Parallel()
	cand := func(name string) backend.CandidateResult {
		return backend.CandidateResult{Candidate: name, Artifacts: []backend.FileRef{
			{Role: "engine", Path: name + "/model.plan"}, {Role: "log", Path: name + "/build.log"}, {Role: "layers", Path: name + "/layers.json"},
		}}
	}
	for _, tc := range []struct {
		name   string
		winner int // -1: none
		want   string
	}{
		{"winner first", 0, "[[engine log layers] [log layers] [log layers]]"},
		{"winner last", 2, "[[log layers] [log layers] [engine log layers]]"},
		{"no winner", -1, "[[log layers] [log layers] [log layers]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &tuner.Result{Results: []backend.CandidateResult{cand("a"), cand("b"), cand("c")}}
			if tc.winner >= 0 {
				res.Winner = &tuner.Winner{Selection: strategy.Selection{Index: tc.winner}}
			}
			shared := res.Results[1].Artifacts // the tuner's own slice must stay whole
			dropLosingEngines(res)
			var got [][]string
			for _, cr := range res.Results {
				var roles []string
				for _, a := range cr.Artifacts {
					roles = append(roles, a.Role)
				}
				got = append(got, roles)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("roles %s, want %s", s, tc.want)
			}
			if len(shared) != 3 || shared[0].Role != "engine" {
				t.Errorf("the caller's artifact slice was changed: %v", shared)
			}
		})
	}
}
