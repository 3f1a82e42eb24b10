package web

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/report"

	"github.com/tunefleet/tunefleet/internal/clip"
)

type nightlyListPage struct {
	Nightlies []report.Listed
}

func (s *Server) handleNightlyList(w http.ResponseWriter, r *http.Request) {
	list, err := report.List(r.Context(), s.cfg.Store)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s.render(w, http.StatusOK, "nightlies", "nightlies", nightlyListPage{list})
}

type nightlyPage struct {
	Body      template.HTML
	Nightly   string
	HasReport bool // the morning report wrote report.html
}

// handleNightly shows a nightly's morning report summarized now (the
// runs that finished since the report was written included), its names
// linked to this server's pages.
func (s *Server) handleNightly(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.nameTooLong(w, r, "nightly", id) {
		return
	}
	sum, err := report.Show(r.Context(), s.cfg.Store, id)
	switch {
	case errors.Is(err, report.ErrBadNightly):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no nightly %s: %w", clip.Counted(id, clip.Echo), err))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	body, err := report.Body(sum, report.Links{Served: true})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	files, err := s.cfg.Store.List(r.Context(), "nightly/"+id+"/")
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s.render(w, http.StatusOK, "nightly", "nightly "+id, nightlyPage{Body: body, Nightly: id, HasReport: slices.Contains(files, report.ReportKey(id))})
}

// handleNightlyReport serves the report.html the morning report wrote, as
// the store holds it.
func (s *Server) handleNightlyReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := report.CheckNightly(id); err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	data, err := artifacts.ReadObject(r.Context(), s.cfg.Store, report.ReportKey(id), 64<<20)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("nightly %s has no report.html (producer nightly report %s writes it)", id, id))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(data)
}
