package jobs

import (
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

// putRunReport writes runs/<run>/report.html from what finalize's pass
// over the graphs rendered (their rows and sections, the summary's bars),
// nothing read again, and uploads it. A repeated finalize writes it again
// (its finalized time differs), which is harmless: nothing points at it
// by digest.
func putRunReport(ctx context.Context, store artifacts.Store, sps *spools, spec *RunSpec, st runstate.RunStatus, ms *state.State, out *finalOutputs) error {
	rows, err := out.rows.reader()
	if err != nil {
		return err
	}
	sections, err := out.sections.reader()
	if err != nil {
		return err
	}
	page := sps.new("report.html")
	if err := out.report.Page(page, runReportHead(spec, st, ms), rows, sections); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	out.rows.drop()
	out.sections.drop()
	r, err := page.reader()
	if err != nil {
		return err
	}
	if err := store.Put(ctx, artifacts.RunReportKey(spec.Run), r, r.Size()); err != nil {
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
	r := reportHead(spec, st)
	names := st.GraphNames()
	if spec != nil {
		names = names[:0]
		for _, g := range spec.Manifest.Graphs {
			names = append(names, g.Name)
		}
	}
	r.Graphs = make([]runreport.Graph, len(names))
	for i, name := range names {
		r.Graphs[i] = reportGraph(st, name, nil)
	}
	return r
}

// reportHead is RunReport without the graphs.
func reportHead(spec *RunSpec, st runstate.RunStatus) *runreport.Report {
	r := &runreport.Report{Run: st.Run, Model: st.Model, Target: st.Target, Platform: st.Platform, Status: st.Status,
		CreatedAt: st.CreatedAt, FinishedAt: st.FinishedAt}
	if st.Reason != "" {
		r.Reasons = strings.Split(st.Reason, "; ")
	}
	if spec != nil {
		r.Strategy, r.Candidates = spec.Strategy, spec.Candidates
	}
	return r
}

// reportGraph is a graph's part of the report: its status in the record,
// and its result (nil: none, or not read).
func reportGraph(st runstate.RunStatus, name string, res *tuner.Result) runreport.Graph {
	gs := st.Graphs[name]
	return runreport.Graph{Name: name, Status: cmp.Or(gs.Status, runstate.GraphPending), Class: gs.Class, Message: gs.Message,
		Attempts: gs.Attempts, LastError: gs.LastError, Result: res}
}

// runReportHead is a finalized run's report without its graphs:
// RunReport's with the state's outcome (the record is not final yet when
// finalize writes it) and the submission's time.
func runReportHead(spec *RunSpec, st runstate.RunStatus, ms *state.State) *runreport.Report {
	r := reportHead(spec, st)
	r.Platform, r.Status, r.Reasons, r.FinishedAt = ms.Platform, ms.Status, ms.Reasons, ms.Provenance.FinalizedAt
	r.CreatedAt = spec.SubmittedAt
	return r
}

// runReport is a finalized run's report with every graph's result: what
// finalize writes a graph at a time (finalizeGraphs, runreport.Stream),
// whole.
func runReport(spec *RunSpec, st runstate.RunStatus, ms *state.State, results map[string]*tuner.Result) *runreport.Report {
	r := RunReport(spec, st)
	head := runReportHead(spec, st, ms)
	head.Graphs = r.Graphs
	for i := range head.Graphs {
		head.Graphs[i].Result = results[head.Graphs[i].Name]
	}
	return head
}
