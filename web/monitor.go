package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
)

// cdnLink matches the stylesheets asynqmon's page loads from Google Fonts.
var cdnLink = regexp.MustCompile(`<link rel="stylesheet" href="https://fonts\.googleapis\.com/[^"]*"/?>`)

// bodyTag is the opening <body> tag of asynqmon's page.
var bodyTag = regexp.MustCompile(`<body[^>]*>`)

// backLink is the way back from /monitor/ to the tunefleet UI.
const backLink = `<a id="tunefleet-back" href="/" style="position:fixed;right:12px;bottom:12px;z-index:10000;background:#1d2330;color:#fff;` +
	`padding:6px 12px;border-radius:4px;font:14px system-ui,sans-serif;text-decoration:none">← tunefleet runs</a>`

// offline serves asynqmon's pages without the fonts it fetches from a CDN:
// a fleet's UI must work where the internet is not reachable, and a
// browser there logs every such fetch as a failure. Its page falls back
// to the system's fonts (icons show as their names). The JSON API and the
// embedded scripts pass through untouched.
func offline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/monitor/api/") || strings.HasPrefix(r.URL.Path, "/monitor/static/") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			body = cdnLink.ReplaceAll(body, nil)
			// asynqmon's app has no way back to the UI it is mounted in:
			// a link of this server's, fixed in a corner above the app.
			body = bodyTag.ReplaceAll(body, []byte("${0}"+backLink))
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		bytes.NewReader(body).WriteTo(w)
	})
}
