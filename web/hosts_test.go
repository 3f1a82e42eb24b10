package web_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/web"
)

// lockedBuffer is a log a server writes from its handlers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hostServer serves the web UI over a real Redis and an empty store,
// with hosts decided as producer serve decides them.
func hostServer(t *testing.T, listen string, allowed []string, auth web.Auth, log *lockedBuffer) *httptest.Server {
	t.Helper()
	rdb := redis.NewClient(mustParse(t, testsvc.Redis(t)))
	t.Cleanup(func() { rdb.Close() })
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := web.NewHosts(allowed, listen, auth)
	if err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{Redis: rdb, Store: store, Write: true, Auth: auth, Hosts: hosts}
	if log != nil {
		cfg.Log = log
	}
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs
}

func mustParse(t *testing.T, u string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// DNS rebinding: a page of rebind.evil.example, its name pointed at
// 127.0.0.1, reaches the socket but names itself in Host, and is refused
// (on main it read every run). Loopback names and configured hosts are
// served; with credentials on a wildcard address any Host is (the
// credentials are what a foreign page cannot send).
func TestHostHeaderIsChecked(t *testing.T) {
	const tok = "9f2c81d04be7a6135c0e"
	loop := hostServer(t, "127.0.0.1:8080", nil, web.Auth{}, nil)
	port := loop.URL[strings.LastIndex(loop.URL, ":")+1:]
	withHost := func(host string) func(*http.Request) { return func(r *http.Request) { r.Host = host } }
	for _, tc := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"rebind.evil.example:" + port, http.StatusMisdirectedRequest},
		{"rebind.evil.example", http.StatusMisdirectedRequest},
		{"127.0.0.1.evil.example:" + port, http.StatusMisdirectedRequest},
	} {
		for _, path := range []string{"/", "/metrics", "/monitor/", "/runs/r1"} {
			code, body := get(t, loop.URL+path, withHost(tc.host))
			if tc.code == http.StatusOK && code == http.StatusMisdirectedRequest || tc.code != http.StatusOK && code != tc.code {
				t.Errorf("Host %s %s: HTTP %d, want %d: %.200s", tc.host, path, code, tc.code, body)
			}
		}
	}
	// A cancel posted from the rebound page: Origin and Host agree, and
	// are both foreign.
	evil := "rebind.evil.example:" + port
	req, _ := http.NewRequest(http.MethodPost, loop.URL+"/runs/r1/cancel", strings.NewReader(url.Values{"token": {"x"}}.Encode()))
	req.Host = evil
	req.Header.Set("Origin", "http://"+evil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("cancel from a rebound page: HTTP %d, want 4xx", resp.StatusCode)
	}

	// Configured names are served, others not.
	named := hostServer(t, "127.0.0.1:8080", []string{"Tunefleet.Example"}, web.Auth{}, nil)
	if code, _ := get(t, named.URL+"/", withHost("tunefleet.example")); code != http.StatusOK {
		t.Errorf("an --allowed-hosts name: HTTP %d", code)
	}
	// With credentials on a specific address, that address is this server.
	auth := web.Auth{Token: tok}
	bearer := func(host string) func(*http.Request) {
		return func(r *http.Request) { r.Host = host; r.Header.Set("Authorization", "Bearer "+tok) }
	}
	specific := hostServer(t, "10.1.2.3:8080", nil, auth, nil)
	if code, _ := get(t, specific.URL+"/", bearer("10.1.2.3:8080")); code != http.StatusOK {
		t.Errorf("the listen host: HTTP %d", code)
	}
	if code, _ := get(t, specific.URL+"/", bearer("rebind.evil.example")); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign host with credentials on a specific address: HTTP %d", code)
	}
	wild := hostServer(t, "0.0.0.0:8080", nil, auth, nil)
	if code, _ := get(t, wild.URL+"/", bearer("tunefleet.corp:8080")); code != http.StatusOK {
		t.Errorf("any host, with credentials on 0.0.0.0: HTTP %d", code)
	}
	if _, err := web.NewHosts([]string{"http://x.example/"}, "127.0.0.1:8080", web.Auth{}); err == nil {
		t.Error("--allowed-hosts with a URL accepted")
	}
}

// A 10,000-character path is neither a 502 nor a 10 KB log line or page:
// the server answers at once, and what it echoes is cut.
func TestLongPathIsCut(t *testing.T) {
	var log lockedBuffer
	hs := hostServer(t, "127.0.0.1:8080", nil, web.Auth{}, &log)
	for _, path := range []string{"/runs/" + strings.Repeat("r", 10000), "/models/" + strings.Repeat("m", 10000), "/" + strings.Repeat("x", 10000),
		"/runs/" + strings.Repeat("r", 900), "/models/" + strings.Repeat("m", 900)} {
		code, body := get(t, hs.URL+path, nil)
		if code >= 500 || code < 400 || len(body) > 4000 {
			t.Errorf("GET %.30s… (%d chars): HTTP %d, %d bytes", path, len(path), code, len(body))
		}
	}
	if len(log.String()) > 2000 {
		t.Errorf("the log has %d bytes:\n%.500s", len(log.String()), log.String())
	}
}
