package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/targetclass"
)

// runsPage is the runs list's data.
type runsPage struct {
	Model, Status, Target string
	Statuses              []string
	Runs                  []runRow
	// Next is the URL of the next (older) page, "" on the last.
	Next string
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := runsPage{Model: q.Get("model"), Status: q.Get("status"), Target: q.Get("target"),
		Statuses: []string{runstate.RunRunning, runstate.RunDone, runstate.RunFailed, runstate.RunCancelled}}
	// The model filter finds a model by any part of its name (demo finds
	// demo_model), or by its start with a leading ^.
	o := runstate.ListOptions{ModelLike: p.Model, Status: p.Status, Target: p.Target, Limit: s.cfg.PageSize}
	switch p.Status {
	case "", runstate.RunRunning, runstate.RunDone, runstate.RunFailed, runstate.RunCancelled:
	default:
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("status %q: want running, done, failed or cancelled", p.Status))
		return
	}
	if b := q.Get("before"); b != "" {
		t, err := time.Parse(time.RFC3339Nano, b)
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("before %q: want an RFC 3339 time", b))
			return
		}
		o.Before = t
	}
	list, err := s.runs.List(r.Context(), o)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	now := time.Now()
	for _, st := range list {
		p.Runs = append(p.Runs, newRunRow(st, now))
	}
	if len(list) == s.cfg.PageSize {
		next := url.Values{}
		for k, v := range map[string]string{"model": p.Model, "status": p.Status, "target": p.Target} {
			if v != "" {
				next.Set(k, v)
			}
		}
		next.Set("before", list[len(list)-1].CreatedAt.Format(time.RFC3339Nano))
		p.Next = "/?" + next.Encode()
	}
	s.render(w, http.StatusOK, "runs", "runs", p)
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	if s.nameTooLong(w, r, "run", id) {
		return
	}
	lr, err := s.loadRun(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		s.fail(w, r, http.StatusNotFound, err)
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	body, err := lr.body()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	data := struct {
		Run       string
		Body      any
		CanCancel bool
		Token     string
		Report    bool
		Requested time.Time
		Cancelled string
		// Waiting is "waiting for a worker of class X (none live; last
		// seen …)" while the run is not final and no worker of its class
		// is live (the rule of package targetclass, as status says it).
		Waiting string
		// Progress is a row per pending graph while the run goes on:
		// where it stands, as `producer status RUN` says it.
		Progress []progressRow
		Updated  time.Time
		// Related links the run's nightly, its comparison with the
		// previous run and its regression (related.go).
		Related related
	}{Run: id, Body: body, Requested: lr.status.CancelRequested, Cancelled: r.URL.Query().Get("cancelled"), Updated: time.Now()}
	if lr.inRedis && !lr.status.Final() {
		// asynq's record of each pending graph's task makes the one view
		// status shows (a task a worker holds ahead of a slot is waiting,
		// not running); without it the worker's progress alone decides.
		st := lr.status
		if err := jobs.AddTasks(r.Context(), s.runs, &st); err == nil {
			lr.status = st
		}
		data.Progress = progressRows(lr.status, data.Updated)
		// A registry that cannot be read just leaves the line out: the
		// page still shows the run.
		if wait, err := targetclass.WaitOf(r.Context(), s.cfg.Redis, lr.status.Target, nil); err == nil && wait != nil {
			data.Waiting = wait.Message
		}
	}
	data.Related = s.relatedOf(r.Context(), lr.status, lr.spec)
	data.CanCancel = s.cfg.Write && lr.inRedis && !lr.status.Final() && lr.status.CancelRequested.IsZero()
	if data.CanCancel {
		data.Token = s.cancelToken(id)
	}
	if lr.status.Final() { // finalize writes it; a running run has none
		if _, err := s.cfg.Store.Stat(r.Context(), artifacts.RunReportKey(id)); err == nil {
			data.Report = true
		}
	}
	refresh := 0
	if !lr.status.Final() {
		refresh = runningRefresh
	}
	s.renderRefresh(w, http.StatusOK, "run", "run "+id, data, refresh)
}

// handleRunReport serves the run's report.html from the store, as
// finalize wrote it.
func (s *Server) handleRunReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	if s.nameTooLong(w, r, "run", id) {
		return
	}
	key := artifacts.RunReportKey(id)
	if err := artifacts.CheckKey(key); err != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no run %q", id))
		return
	}
	data, err := artifacts.ReadObject(r.Context(), s.cfg.Store, key, 64<<20)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("run %s has no report.html (finalize writes it when the run ends)", id))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// It is the store's document, not this server's page: no script runs.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(data)
}

// progressRow is one pending graph of the run page's progress table.
type progressRow struct {
	Graph, State, Worker, Phase, Candidate, InPhase, InAttempt string
}

// progressRows are a running run's pending graphs, in the order of their
// names: each one's state and, while a worker is on it, the worker, the
// phase, the candidate and the time in the phase and in the attempt.
func progressRows(st runstate.RunStatus, now time.Time) []progressRow {
	var rows []progressRow
	for _, name := range st.GraphNames() {
		g := st.Graphs[name]
		if g.Status != runstate.GraphPending {
			continue
		}
		row := progressRow{Graph: name, State: g.StateText(), Worker: "—", Phase: "—", Candidate: "—", InPhase: "—", InAttempt: "—"}
		if p := g.Progress; p != nil {
			row.Worker, row.Phase, row.InPhase, row.InAttempt = p.Worker, p.Phase, human.Duration(p.InPhase(now)), human.Duration(p.InAttempt(now))
			if p.Candidate != "" {
				row.Candidate = p.Candidate
				if p.Index > 0 && p.Count > 0 {
					row.Candidate += fmt.Sprintf(" (%d/%d)", p.Index, p.Count)
				}
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// runningRefresh is how often (seconds) a page showing a running run
// reloads itself: a meta refresh, no script.
const runningRefresh = 10

// runRow is one run of the runs list: its record and what the list says
// of it beyond.
type runRow struct {
	runstate.RunStatus
	runstate.Summary
	// Took is how long the run took (or has taken), as the list shows it:
	// sub-second runs in milliseconds, never "0s".
	Took string
	// DonePct and FailedPct split the progress bar: done well, failed.
	DonePct, FailedPct int
}

func newRunRow(st runstate.RunStatus, now time.Time) runRow {
	r := runRow{RunStatus: st, Summary: st.Summary(), Took: human.Duration(st.Duration(now))}
	r.FailedPct = pct(st.Failed+st.Cancelled, st.Total)
	r.DonePct = pct(st.Done, st.Total) - r.FailedPct
	return r
}
