package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/tunefleet/tunefleet/compare"
	"github.com/tunefleet/tunefleet/runstate"
)

// comparePage is /compare's data: the form, and the comparison once both
// runs are named.
type comparePage struct {
	A, B       string
	Comparison *compare.Comparison
	// Recent are the runs the form offers (a datalist: any run id may
	// still be typed): the recent runs of A's model (or B's), else the
	// recent runs of every model.
	Recent []runstate.RunStatus
}

// recentOffered is how many runs the compare form offers.
const recentOffered = 30

// recentFor lists the runs the compare form offers for a and b, from the
// runs index (a page of it, whatever the history's length). A Redis that
// does not answer offers none: the form still takes typed ids.
func (s *Server) recentFor(ctx context.Context, a, b string) []runstate.RunStatus {
	o := runstate.ListOptions{Limit: recentOffered}
	for _, id := range []string{a, b} {
		if id == "" || len(id) > maxName {
			continue
		}
		if st, err := s.runs.Get(ctx, id); err == nil {
			o.Model = st.Model
			break
		}
	}
	list, err := s.runs.List(ctx, o)
	if err != nil {
		return nil
	}
	return list
}

// handleCompare puts two runs side by side (compare.Runs): with a and b
// missing it shows the form; a run the store does not have is a 404.
func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := comparePage{A: q.Get("a"), B: q.Get("b")}
	if p.A == "" || p.B == "" {
		p.Recent = s.recentFor(r.Context(), p.A, p.B)
		s.render(w, http.StatusOK, "compare", "compare runs", p)
		return
	}
	if s.nameTooLong(w, r, "run", p.A) || s.nameTooLong(w, r, "run", p.B) {
		return
	}
	var runs [2]*compare.Run
	for i, id := range []string{p.A, p.B} {
		run, err := compare.Load(r.Context(), s.cfg.Store, id)
		switch {
		case errors.Is(err, compare.ErrNoRun):
			s.fail(w, r, http.StatusNotFound, err)
			return
		case err != nil:
			s.fail(w, r, http.StatusBadGateway, err)
			return
		}
		runs[i] = run
	}
	c := compare.Runs(runs[0], runs[1])
	p.Comparison = &c
	p.Recent = s.recentFor(r.Context(), p.A, p.B)
	s.render(w, http.StatusOK, "compare", "compare "+p.A+" and "+p.B, p)
}
