package jobs

import (
	"bytes"
	"context"
	"fmt"

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

// runReport assembles a finalized run's report: run.json's submission,
// the run record's graph statuses, the state's outcome and the graphs'
// results by name.
func runReport(spec *RunSpec, st runstate.RunStatus, ms *state.State, results map[string]*tuner.Result) *runreport.Report {
	r := &runreport.Report{
		Run: spec.Run, Model: spec.Model, Target: spec.Target, Platform: ms.Platform, Strategy: spec.Strategy,
		Candidates: spec.Candidates, Status: ms.Status, Reasons: ms.Reasons, CreatedAt: spec.SubmittedAt,
		FinishedAt: ms.Provenance.FinalizedAt,
	}
	for _, g := range spec.Manifest.Graphs {
		gs := st.Graphs[g.Name]
		r.Graphs = append(r.Graphs, runreport.Graph{Name: g.Name, Status: orDefault(gs.Status, runstate.GraphPending), Class: gs.Class,
			Message: gs.Message, Result: results[g.Name]})
	}
	return r
}
