package jobs

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// putRunReport writes runs/<run>/report.html from what finalize already
// holds: one PUT, nothing read again. A repeated finalize writes it again
// (its finalized time differs), which is harmless: nothing points at it by
// digest.
func putRunReport(ctx context.Context, store artifacts.Store, spec *RunSpec, st runstate.RunStatus, ms *state.State, results map[string]*tuner.Result) error {
	var b bytes.Buffer
	if err := runreport.Page(&b, runReport(spec, st, ms, results)); err != nil {
		return err
	}
	if err := store.Put(ctx, artifacts.RunReportKey(spec.Run), bytes.NewReader(b.Bytes()), int64(b.Len())); err != nil {
		return permanentIfBadKey(fmt.Errorf("write report.html: %w", err))
	}
	return nil
}

// RunReport assembles a run's report from its run record and its run.json
// (spec; nil when the store has none): the submission, each graph's status
// in the manifest's order (the record's when there is no run.json), and
// the record's outcome. The one builder of a run's report: finalize's
// report.html and the web UI's run page both start here. The graphs'
// results are the caller's to add (finalize holds them; the web UI reads
// them).
func RunReport(spec *RunSpec, st runstate.RunStatus) *runreport.Report {
	r := &runreport.Report{Run: st.Run, Model: st.Model, Target: st.Target, Platform: st.Platform, Status: st.Status,
		CreatedAt: st.CreatedAt, FinishedAt: st.FinishedAt}
	if st.Reason != "" {
		r.Reasons = strings.Split(st.Reason, "; ")
	}
	names := st.GraphNames()
	if spec != nil {
		r.Strategy, r.Candidates = spec.Strategy, spec.Candidates
		names = names[:0]
		for _, g := range spec.Manifest.Graphs {
			names = append(names, g.Name)
		}
	}
	r.Graphs = make([]runreport.Graph, len(names))
	for i, name := range names {
		gs := st.Graphs[name]
		r.Graphs[i] = runreport.Graph{Name: name, Status: cmp.Or(gs.Status, runstate.GraphPending), Class: gs.Class, Message: gs.Message,
			Attempts: gs.Attempts, LastError: gs.LastError}
	}
	return r
}

// runReport is a finalized run's report: RunReport with the state's
// outcome (the record is not final yet when finalize writes it), the
// submission's time, and the graphs' results by name.
func runReport(spec *RunSpec, st runstate.RunStatus, ms *state.State, results map[string]*tuner.Result) *runreport.Report {
	r := RunReport(spec, st)
	r.Platform, r.Status, r.Reasons, r.FinishedAt = ms.Platform, ms.Status, ms.Reasons, ms.Provenance.FinalizedAt
	r.CreatedAt = spec.SubmittedAt
	for i := range r.Graphs {
		r.Graphs[i].Result = results[r.Graphs[i].Name]
	}
	return r
}
