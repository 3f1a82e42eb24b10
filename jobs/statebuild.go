// The module state (state.json) built from run.json, the run's status and
// the graphs' results, whole (BuildState) or a graph at a time (finalize).

package jobs

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/version"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// BuildState assembles the module state from run.json, the run's status
// and the graphs' results (by graph name). A graph without a winner (or
// without a result) fails the run. (Finalize builds the same state a
// graph at a time, never holding it whole: finalizeGraphs.)
func BuildState(spec *RunSpec, st runstate.RunStatus, results map[string]*tuner.Result) *state.State {
	b := newStateBuilder(spec, st)
	var graphs []state.StateGraph
	for _, g := range spec.Manifest.Graphs {
		graphs = append(graphs, b.add(g, results[g.Name]))
	}
	s := b.finish()
	s.Graphs = graphs
	return s
}

// stateBuilder builds a module state a graph at a time: add builds each
// graph's entry and keeps what the state says of all of them (its status,
// the reasons, the workers), not the entry; finish is the state without
// its graphs.
type stateBuilder struct {
	spec    *RunSpec
	st      runstate.RunStatus
	s       *state.State
	workers map[string]bool
}

func newStateBuilder(spec *RunSpec, st runstate.RunStatus) *stateBuilder {
	s := &state.State{
		Format: state.StateFormat, Model: spec.Model, Platform: orDefault(st.Platform, spec.Target), Target: spec.Target, Run: spec.Run, Status: runstate.RunDone,
		Provenance: state.Provenance{
			Tunefleet: version.String(), Go: version.Go(), BundleDigest: spec.BundleDigest, Target: spec.Target,
			Strategy: spec.Strategy, LatencyBudgetMs: spec.LatencyBudgetMs, Candidates: spec.Candidates,
			Command: spec.Command, SubmittedBy: spec.SubmittedBy, SubmittedAt: spec.SubmittedAt, FinalizedAt: time.Now().UTC(),
		},
	}
	return &stateBuilder{spec: spec, st: st, s: s, workers: map[string]bool{}}
}

// add is the state's entry of graph g, whose result is r (nil: none), in
// the manifest's order.
func (b *stateBuilder) add(g bundle.Graph, r *tuner.Result) state.StateGraph {
	s := b.s
	sg := state.StateGraph{Name: g.Name, Inputs: g.Inputs, Outputs: g.Outputs, ResultKey: artifacts.GraphResultKey(b.spec.Run, g.Name)}
	switch {
	case r == nil:
		gs := b.st.Graphs[g.Name]
		sg.Failure = &backend.FailureInfo{Class: backend.FailureClass(orDefault(gs.Class, string(backend.FailInfrastructure))), Message: orDefault(gs.Message, "no result was recorded")}
	default:
		sg.Profile = r.Profile
		if r.FoundMaxBatch > 0 {
			// The engine was built for the range the find-max-batch
			// step extended (AITune's update_max_batch_size): the
			// state and the checkpoint declare that range.
			sg.Inputs = maxbatch.Extend(g.Inputs, r.FoundMaxBatch)
		}
		sg.Worker = r.Worker
		if r.Worker != "" {
			b.workers[r.Worker] = true
		}
		if r.OK() {
			sel := r.Winner.Selection
			sg.Candidate = sel.Candidate
			sg.Selection = &sel
			win := r.Results[sel.Index]
			sg.Benchmarks = win.Benchmarks
			sg.Info = win.Info
			sg.Requires = stateRequires(r, sel.Candidate, win.Info, s.Platform)
			if e := r.Winner.Engine; e != nil {
				sg.Engine = &state.EngineRef{Key: artifacts.BlobKey(e.SHA256), File: baseName(e.Path), SHA256: e.SHA256, Size: e.Size, Data: engineData(e.Path, r.Winner.EngineData)}
			}
		} else {
			sg.Failure = r.Failure
		}
	}
	if sg.Failure != nil || sg.Engine == nil {
		s.Status = runstate.RunFailed
		msg := "no engine"
		if sg.Failure != nil {
			msg = fmt.Sprintf("%s: %s", sg.Failure.Class, firstLine(sg.Failure.Message))
		}
		s.Reasons = append(s.Reasons, fmt.Sprintf("graph %s: %s", g.Name, msg))
	}
	return sg
}

// finish is the state of the graphs added, without them.
func (b *stateBuilder) finish() *state.State {
	s, st := b.s, b.st
	if st.Status == runstate.RunCancelled || !st.CancelRequested.IsZero() {
		s.Status = runstate.RunCancelled
		s.Reasons = append([]string{"cancelled at " + st.CancelRequested.Format(time.RFC3339)}, s.Reasons...)
	}
	for wk := range b.workers {
		s.Provenance.Workers = append(s.Provenance.Workers, wk)
	}
	sort.Strings(s.Provenance.Workers)
	return s
}

func uniq(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" && (len(out) == 0 || out[len(out)-1] != x) {
			out = append(out, x)
		}
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// engineData names the files an engine reads beside itself by their path
// relative to the engine's directory (how the engine names them, and where
// fetch puts them).
func engineData(engine string, files []backend.FileRef) []state.EngineDataRef {
	var out []state.EngineDataRef
	dir := path.Dir(engine) + "/"
	for _, f := range files {
		out = append(out, state.EngineDataRef{Key: artifacts.BlobKey(f.SHA256), File: strings.TrimPrefix(f.Path, dir), SHA256: f.SHA256, Size: f.Size})
	}
	return out
}

func baseName(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
