package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tunefleet/tunefleet/runstate"
)

// cancelToken is the Cancel form's token for a run: an HMAC under the
// server's secret, so a page of this server, and nothing else, can post it.
func (s *Server) cancelToken(run string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("cancel\x00" + run))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin reports whether a POST came from a page of this server: its
// Origin (or, from browsers that send none, its Referer) names this host.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	u, err := url.Parse(from)
	return from != "" && err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
}

// handleCancel does what `producer cancel RUN` does, for a Cancel button:
// only with --write, from this server's own page, with its token.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	switch {
	case !s.cfg.Write:
		s.fail(w, r, http.StatusForbidden, errors.New("this server is read-only: start producer serve with --write to cancel runs here"))
		return
	case !sameOrigin(r):
		s.fail(w, r, http.StatusForbidden, errors.New("cancel must be posted from this server's run page (cross-origin request refused)"))
		return
	}
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if !hmac.Equal([]byte(r.PostForm.Get("token")), []byte(s.cancelToken(id))) {
		s.fail(w, r, http.StatusForbidden, errors.New("the cancel form's token is missing or stale: reload the run page"))
		return
	}
	res, err := s.client.Cancel(r.Context(), id)
	switch {
	case errors.Is(err, runstate.ErrNoRun):
		s.fail(w, r, http.StatusNotFound, err)
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, fmt.Errorf("cancel run %s: %w", id, err))
		return
	}
	s.log.Printf("run %s: cancelled from the web UI by %s, %d pending graph(s) dropped", id, r.RemoteAddr, len(res.Graphs))
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?cancelled="+fmt.Sprint(len(res.Graphs)), http.StatusSeeOther)
}
