package web

import (
	"errors"
	"net/http"

	"github.com/tunefleet/tunefleet/compare"
)

// comparePage is /compare's data: the form, and the comparison once both
// runs are named.
type comparePage struct {
	A, B       string
	Comparison *compare.Comparison
}

// handleCompare puts two runs side by side (compare.Runs): with a and b
// missing it shows the form; a run the store does not have is a 404.
func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := comparePage{A: q.Get("a"), B: q.Get("b")}
	if p.A == "" || p.B == "" {
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
	s.render(w, http.StatusOK, "compare", "compare "+p.A+" and "+p.B, p)
}
