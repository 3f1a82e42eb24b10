package web

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log"
	"net/http"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/compare"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// Config configures a Server.
type Config struct {
	Redis redis.UniversalClient
	Store artifacts.Store
	// Write enables what changes the fleet: the Cancel button.
	Write bool
	// Auth, when set, is required of every request.
	Auth Auth
	// Hosts is which Host headers and Origins are this server's (zero:
	// loopback names only).
	Hosts Hosts
	// PageSize is how many runs the runs list shows (default 25).
	PageSize int
	// Log receives one line per server error; nil discards.
	Log io.Writer
}

// Server is the web UI's handler.
type Server struct {
	cfg     Config
	runs    *runstate.Runs
	client  *jobs.Client
	mux     *http.ServeMux
	monitor *asynqmon.HTTPHandler
	secret  []byte // keys the Cancel form's tokens; new each start
	log     *log.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the handler. Close it when done.
func New(cfg Config) (*Server, error) {
	if cfg.Redis == nil || cfg.Store == nil {
		return nil, errors.New("web: Config needs Redis and Store")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 25
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &Server{cfg: cfg, runs: runstate.NewRuns(cfg.Redis), mux: http.NewServeMux(),
		secret: make([]byte, 32), log: log.New(cfg.Log, "serve: ", log.LstdFlags)}
	if cfg.Write {
		// Only Cancel uses it; with the store it finalizes a run no
		// worker holds.
		s.client = jobs.NewClient(cfg.Redis, cfg.Store)
	}
	if _, err := rand.Read(s.secret); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	// asynqmon takes a connection option and makes its clients from it;
	// this one hands it the server's client, so it reaches the same Redis
	// (Sentinel and Cluster included) with no second configuration.
	s.monitor = asynqmon.New(asynqmon.Options{RootPath: "/monitor", RedisConnOpt: sharedRedis{cfg.Redis}, ReadOnly: true})
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(asynq.NewInspectorFromRedisClient(cfg.Redis), s.runs))
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /static/report.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		io.WriteString(w, runreport.CSS)
	})
	s.mux.HandleFunc("GET /static/nightly.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		io.WriteString(w, report.CSS)
	})
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("GET /{$}", s.handleRuns)
	s.mux.HandleFunc("GET /runs/{run}", s.handleRun)
	s.mux.HandleFunc("GET /runs/{run}/report.html", s.handleRunReport)
	s.mux.HandleFunc("POST /runs/{run}/cancel", s.handleCancel)
	s.mux.HandleFunc("GET /models/{model}", s.handleModel)
	s.mux.HandleFunc("GET /fleet", s.handleFleet)
	s.mux.HandleFunc("GET /nightly", s.handleNightlyList)
	s.mux.HandleFunc("GET /nightly/{id}", s.handleNightly)
	s.mux.HandleFunc("GET /nightly/{id}/report.html", s.handleNightlyReport)
	s.mux.HandleFunc("GET /compare", s.handleCompare)
	s.mux.HandleFunc("GET /blobs/sha256/{hex}", s.handleBlob)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: s.log}))
	s.mux.Handle("/monitor/", offline(s.monitor))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", r.URL.Path))
	})
	return s, nil
}

// maxPath is the longest path a request may have: run IDs, model names
// and blob digests are far shorter, and a longer one would only be
// echoed into messages and logs, or reach the store as a key.
const maxPath = 1024

// maxName is the longest run id, model name or nightly id a page can name:
// a model name is at most bundle.MaxModelNameBytes, a run id that and a
// suffix, and a store keeps a key's part in one file name (255 bytes).
// A longer one names nothing, whatever the store would make of it as a
// key (a file name too long: an error, not "not found").
const maxName = 255

// nameTooLong answers 404, with a page that does not repeat it, for a
// name no run, model or nightly can have; it reports whether it did.
func (s *Server) nameTooLong(w http.ResponseWriter, r *http.Request, what, name string) bool {
	if len(name) <= maxName {
		return false
	}
	s.fail(w, r, http.StatusNotFound, fmt.Errorf("no %s has a name of %d bytes: names are at most %d", what, len(name), maxName))
	return true
}

// ServeHTTP checks the Host header and authentication, refuses what would change the fleet
// unless it is the one write this server allows, and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Probes (a container HEALTHCHECK, a kubelet) carry no credentials,
		// and the answer tells nothing about the fleet.
		s.healthz(w, r)
		return
	}
	if !s.cfg.Hosts.allows(r.Host) {
		// DNS rebinding: another site's page, its name pointed at this
		// address, names itself here.
		http.Error(w, fmt.Sprintf("host %q is not this server's: open it by a loopback address or localhost, or start producer serve with --allowed-hosts", clip.Counted(r.Host, clip.Echo)), http.StatusMisdirectedRequest)
		return
	}
	if len(r.URL.Path) > maxPath {
		s.fail(w, r, http.StatusRequestURITooLong, fmt.Errorf("path of %d characters: no page has one over %d", len(r.URL.Path), maxPath))
		return
	}
	if !s.cfg.Auth.allows(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="tunefleet", charset="UTF-8"`)
		http.Error(w, "authentication required: a bearer token or basic auth (see producer serve --help)", http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel") && strings.HasPrefix(r.URL.Path, "/runs/"):
		// handleCancel answers 403 without --write.
	default:
		http.Error(w, "read-only: "+r.Method+" is not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// healthz answers 200 while the server reaches Redis (every page needs
// it), 503 with the reason otherwise.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Redis.Ping(r.Context()).Err(); err != nil {
		http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Close releases the server's queue client. The Redis client is the
// caller's.
func (s *Server) Close() error {
	if s.client == nil {
		return nil
	}
	return s.client.Close()
}

// sharedRedis is an asynq.RedisConnOpt that hands out an existing client.
type sharedRedis struct{ c redis.UniversalClient }

func (o sharedRedis) MakeRedisClient() any { return o.c }

// pages are the templates, each the layout with one page's content.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{"when": when, "num": num, "pct": pct, "short": short, "devtime": devtime, "age": age, "kindText": func(k string) string { return strings.ReplaceAll(k, "_", " ") },
		"ratio": compare.RatioText, "verdict": compare.VerdictText, "pct100": func(v float64) string { return strconv.FormatFloat(v*100, 'g', 3, 64) },
		"compareURL": compareURL}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"runs", "run", "model", "fleet", "compare", "error", "nightlies", "nightly"} {
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}()

// render writes a page with the given status.
func (s *Server) render(w http.ResponseWriter, status int, name, title string, data any) {
	s.renderRefresh(w, status, name, title, data, 0)
}

// renderRefresh is render of a page that reloads itself every refresh
// seconds (0: never), by a meta refresh: a page that follows a running
// run needs no script.
func (s *Server) renderRefresh(w http.ResponseWriter, status int, name, title string, data any, refresh int) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	if err := pages[name].ExecuteTemplate(w, "layout.html", struct {
		Title   string
		Page    any
		Refresh int
	}{title, data, refresh}); err != nil {
		s.log.Printf("render %s: %v", name, err)
	}
}

// fail shows an error page: 404s and bad input by what to fix, the rest
// logged as well.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := clip.Counted(err.Error(), clip.Echo)
	if status >= 500 {
		s.log.Printf("%s %s: %s", r.Method, clip.Counted(r.URL.Path, clip.Echo), msg)
	}
	s.render(w, status, "error", http.StatusText(status), struct {
		Status int
		Text   string
		Err    string
	}{status, http.StatusText(status), msg})
}
