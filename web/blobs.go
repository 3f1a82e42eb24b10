package web

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
)

// isSHA256 reports whether s is 64 lowercase hex digits: the only blob
// names there are, so nothing else reaches the store.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// textRoles are file names served as text: build and run logs.
func isText(name string) bool {
	ext := path.Ext(name)
	return ext == ".log" || ext == ".txt" || ext == ".json" || strings.HasSuffix(name, "log")
}

// handleBlob serves a stored blob read-only. ?name= names the file:
// logs show as plain text, everything else downloads under that name.
func (s *Server) handleBlob(w http.ResponseWriter, r *http.Request) {
	hex := r.PathValue("hex")
	if !isSHA256(hex) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("%q is not a sha256 (64 lowercase hex digits)", hex))
		return
	}
	key := artifacts.BlobKey(hex)
	info, err := s.cfg.Store.Stat(r.Context(), key)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no blob %s in %s", hex, s.cfg.Store))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	name := path.Base(r.URL.Query().Get("name"))
	if name == "." || name == "/" || name == "" {
		name = hex
	}
	h := w.Header()
	if isText(name) {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("Cache-Control", "public, max-age=31536000, immutable") // content-addressed
	h.Set("ETag", `"`+hex+`"`)
	if r.Method == http.MethodHead {
		return // the Stat said all a HEAD needs
	}
	rc, err := s.cfg.Store.Get(r.Context(), key)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Printf("serve blob %s: %v", hex, err)
	}
}
