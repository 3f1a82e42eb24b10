package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// errNotFound marks what a 404 page answers.
var errNotFound = errors.New("not found")

// loadedRun is a run as the run page shows it.
type loadedRun struct {
	report  *runreport.Report
	status  runstate.RunStatus
	spec    *jobs.RunSpec // run.json; nil when the store has none
	inRedis bool          // false: Redis no longer has it; the store's record is shown
}

// links are the run page's: blobs and models served here.
var links = runreport.Links{
	Blob:  func(sha, name string) string { return "/blobs/sha256/" + sha + "?name=" + url.QueryEscape(name) },
	Model: func(m string) string { return "/models/" + url.PathEscape(m) },
	Run:   func(id string) string { return "/runs/" + url.PathEscape(id) },
}

func (lr *loadedRun) body() (template.HTML, error) { return runreport.Body(lr.report, links) }

// loadRun reads a run: its record from Redis (or, past Redis's retention,
// its state.json from the store), run.json, and each finished graph's
// result. A result that cannot be read or decoded is shown as unreadable,
// with the reason; the rest of the run still renders.
func (s *Server) loadRun(ctx context.Context, id string) (*loadedRun, error) {
	if err := artifacts.CheckKey(artifacts.RunKey(id)); err != nil || strings.Contains(id, "/") {
		return nil, fmt.Errorf("%w: %q is not a run id", errNotFound, id)
	}
	lr := &loadedRun{inRedis: true}
	st, err := s.runs.Get(ctx, id)
	if errors.Is(err, runstate.ErrNoRun) {
		lr.inRedis = false
	} else if err != nil {
		return nil, err
	}
	var spec jobs.RunSpec
	specErr := artifacts.GetJSON(ctx, s.cfg.Store, artifacts.RunKey(id), &spec)
	if specErr != nil && !errors.Is(specErr, artifacts.ErrNotExist) {
		return nil, fmt.Errorf("read run.json of %s: %w", id, specErr)
	}
	switch {
	case !lr.inRedis && specErr != nil:
		return nil, fmt.Errorf("%w: no run %s in Redis or in %s", errNotFound, id, s.cfg.Store)
	case !lr.inRedis:
		if st, err = s.fromStore(ctx, &spec); err != nil {
			return nil, err
		}
	}
	lr.status = st
	var sp *jobs.RunSpec
	if specErr == nil {
		sp = &spec
	}
	lr.spec = sp
	rep := jobs.RunReport(sp, st)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8) // a store's latency, not its bandwidth, is what many graphs wait on
	for i := range rep.Graphs {
		name := rep.Graphs[i].Name
		gs := st.Graphs[name]
		if gs.Status == runstate.GraphPending || gs.Status == "" && lr.inRedis {
			continue
		}
		// A final run's result.json is the one finalize published; before
		// that, the attempt that completed the graph wrote its own.
		key := artifacts.GraphResultKey(id, name)
		if !st.Final() && gs.ResultKey != "" {
			key = gs.ResultKey
		}
		g.Go(func() error { return s.readResult(gctx, &rep.Graphs[i], key) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	lr.report = rep
	return lr, nil
}

// readResult reads one graph's result into g. Only a store that does not
// answer is an error; a result missing is none, and one that does not
// decode is unreadable.
func (s *Server) readResult(ctx context.Context, g *runreport.Graph, key string) error {
	data, err := artifacts.ReadObject(ctx, s.cfg.Store, key, artifacts.MaxJSONSize)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		return nil
	case errors.Is(err, artifacts.ErrTooLarge):
		g.Unreadable = err.Error()
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", key, err)
	}
	if g.Result, err = runreport.DecodeResult(data); err != nil {
		g.Unreadable = fmt.Sprintf("%s: %v", key, err)
	}
	return nil
}

// fromStore is the record of a run Redis no longer has, from its
// state.json (a run that never finalized shows as unknown).
func (s *Server) fromStore(ctx context.Context, spec *jobs.RunSpec) (runstate.RunStatus, error) {
	st := runstate.RunStatus{Run: spec.Run, Model: spec.Model, Target: spec.Target, Status: "unknown", CreatedAt: spec.SubmittedAt,
		Graphs: map[string]runstate.GraphStatus{}}
	var ms state.State
	err := artifacts.GetJSON(ctx, s.cfg.Store, artifacts.StateKey(spec.Run), &ms)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		st.Reason = "Redis has no record of this run and it has no state.json: it never finalized"
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read state.json of %s: %w", spec.Run, err)
	}
	st.Status, st.Platform, st.FinishedAt = ms.Status, ms.Platform, ms.Provenance.FinalizedAt
	st.Reason = strings.Join(ms.Reasons, "; ")
	for _, g := range ms.Graphs {
		gs := runstate.GraphStatus{Status: runstate.GraphDone, Winner: g.Candidate, ResultKey: g.ResultKey}
		if g.Failure != nil {
			gs.Status, gs.Class, gs.Message = runstate.GraphFailed, string(g.Failure.Class), g.Failure.Message
		}
		st.Graphs[g.Name] = gs
	}
	return st, nil
}
