package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/web"
)

func get(t *testing.T, url string, edit func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeHTTP checks, over real runs, what needs no browser: /metrics
// counts what Redis holds, blobs are reached only by their digest, and
// credentials are required once set.
func TestServeHTTP(t *testing.T) {
	f := newFixture(t)
	hs := f.serve(t, web.Config{})

	// A first night (no history) has its finish guessed from the bundles:
	// the nightly page says it is a guess and shows both spans, never an
	// error percentage (issue 30: "+2502 %").
	t.Run("first night's guess", func(t *testing.T) {
		const night3 = "2026-12-03-0000000000aa"
		at := time.Now().UTC().Add(-time.Hour)
		expected := at.Add(5 * time.Minute)
		p := state.Plan{Format: state.PlanFormat, Nightly: night3, FleetDigest: "sha256:" + strings.Repeat("5e", 32), CreatedAt: at,
			Entries:  []state.PlanEntry{{Model: model, Target: "cpu", Run: f.first, Outcome: state.OutcomeSubmitted, Graphs: 2, Enqueued: 2}},
			Estimate: &state.PlanEstimate{Order: "planned", EnqueuedAt: at, ExpectedFinish: &expected, Guess: true}}
		if err := artifacts.PutJSON(context.Background(), f.store, state.PlanKey(night3), p); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, hs.URL+"/nightly/"+night3, nil)
		if code != http.StatusOK || !strings.Contains(body, "finish: guessed ") || !strings.Contains(body, "a guess: no history yet") ||
			strings.Contains(body, "% of the") {
			t.Errorf("nightly page of a first night: HTTP %d, want its finish shown as a guess with no error percentage:\n%s", code, body)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		code, body := get(t, hs.URL+"/metrics", nil)
		if code != http.StatusOK {
			t.Fatalf("HTTP %d: %s", code, body)
		}
		// Two runs done, one waiting on a queue no worker serves, with
		// its two graphs' tasks pending there.
		for _, want := range []string{`tunefleet_runs{status="done"} 2`, `tunefleet_runs{status="running"} 1`, `tunefleet_runs{status="failed"} 0`,
			`tunefleet_queue_tasks{queue="` + idleQueue + `",state="pending"} 2`, `tunefleet_queue_tasks{queue="cpu",state="active"} 0`} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
	})

	t.Run("blobs", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			code int
		}{
			{"/blobs/sha256/" + strings.Repeat("0", 64), http.StatusNotFound},                  // well-formed, not stored
			{"/blobs/sha256/" + strings.Repeat("A", 64), http.StatusNotFound},                  // not lowercase hex
			{"/blobs/sha256/..%2f..%2fruns%2f" + f.first + "%2frun.json", http.StatusNotFound}, // no escape from blobs/
			{"/blobs/sha256/abc", http.StatusNotFound},
		} {
			if code, body := get(t, hs.URL+tc.path, nil); code != tc.code {
				t.Errorf("%s: HTTP %d, want %d: %s", tc.path, code, tc.code, body)
			}
		}
	})

	t.Run("read-only", func(t *testing.T) {
		for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPost} {
			req, _ := http.NewRequest(m, hs.URL+"/runs/"+f.first, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: HTTP %d, want 405", m, resp.StatusCode)
			}
		}
		if code, _ := get(t, hs.URL+"/runs/"+f.running+"/report.html", nil); code != http.StatusNotFound {
			t.Errorf("report.html of a running run: HTTP %d, want 404", code)
		}
	})

	// A run whose class no worker serves says what it waits for, as
	// status does; a finished run does not.
	t.Run("waiting", func(t *testing.T) {
		want := "waiting for a worker of class " + idleQueue + " (none live; never seen)"
		if code, body := get(t, hs.URL+"/runs/"+f.running, nil); code != http.StatusOK || !strings.Contains(body, `<p class="notice" id="waiting">`+want) {
			t.Errorf("run page of a run on %s: HTTP %d, want the line %q:\n%s", idleQueue, code, want, body)
		}
		if code, body := get(t, hs.URL+"/runs/"+f.first, nil); code != http.StatusOK || strings.Contains(body, "waiting for a worker") {
			t.Errorf("run page of a finished run: HTTP %d, says it waits:\n%s", code, body)
		}
	})

	// A name no run, model or nightly can have (longer than any store key
	// allows) is a page that says so, 404, whatever the store makes of
	// such a key: never a 502 that blames the store.
	t.Run("names over the limit", func(t *testing.T) {
		for _, n := range []int{250, 600, 3000} {
			long := strings.Repeat("x", n)
			for _, path := range []string{"/runs/" + long, "/runs/" + long + "/report.html", "/models/" + long, "/nightly/" + long,
				"/nightly/" + long + "/report.html", "/compare?a=" + long + "&b=" + f.first} {
				code, body := get(t, hs.URL+path, nil)
				want := http.StatusNotFound
				if p, _, _ := strings.Cut(path, "?"); len(p) > 1024 {
					want = http.StatusRequestURITooLong
				}
				if code != want || !strings.Contains(body, "<html") || strings.Contains(body, long) {
					t.Errorf("%d-byte name, %.40s…: HTTP %d, want %d with a page that does not repeat it:\n%.300s", n, path, code, want, body)
				}
			}
		}
	})

	t.Run("auth", func(t *testing.T) {
		authed := f.serve(t, web.Config{Auth: web.Auth{Token: "s3cret", User: "ops", Password: "pw"}})
		for _, tc := range []struct {
			name string
			edit func(*http.Request)
			code int
		}{
			{"none", nil, http.StatusUnauthorized},
			{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, http.StatusOK},
			{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cre") }, http.StatusUnauthorized},
			{"token as basic password", func(r *http.Request) { r.SetBasicAuth("anyone", "s3cret") }, http.StatusOK},
			{"basic", func(r *http.Request) { r.SetBasicAuth("ops", "pw") }, http.StatusOK},
			{"wrong password", func(r *http.Request) { r.SetBasicAuth("ops", "p") }, http.StatusUnauthorized},
		} {
			for _, path := range []string{"/", "/metrics", "/monitor/"} {
				if code, _ := get(t, authed.URL+path, tc.edit); code != tc.code {
					t.Errorf("%s %s: HTTP %d, want %d", tc.name, path, code, tc.code)
				}
			}
			// Probes carry no credentials: /healthz answers everyone.
			if code, body := get(t, authed.URL+"/healthz", tc.edit); code != http.StatusOK || body != "ok\n" {
				t.Errorf("%s /healthz: HTTP %d %q, want 200 ok", tc.name, code, body)
			}
		}
	})

	t.Run("healthz without redis", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		defer rdb.Close()
		srv, err := web.New(web.Config{Redis: rdb, Store: f.store})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		down := httptest.NewServer(srv)
		defer down.Close()
		if code, body := get(t, down.URL+"/healthz", nil); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "redis: ") {
			t.Errorf("/healthz with Redis down: HTTP %d %q, want 503 naming redis", code, body)
		}
	})
}

func TestCheckListen(t *testing.T) {
	token := web.Auth{Token: "9f2c81d04be7a6135c0e"}
	for _, tc := range []struct {
		addr string
		auth web.Auth
		ok   bool
	}{
		{"127.0.0.1:8080", web.Auth{}, true},
		{"[::1]:8080", web.Auth{}, true},
		{"localhost:0", web.Auth{}, true},
		{"0.0.0.0:8080", web.Auth{}, false},
		{":8080", web.Auth{}, false},
		{"10.1.2.3:8080", web.Auth{}, false},
		{"web.internal:8080", web.Auth{}, false},
		{"0.0.0.0:8080", token, true},
		{":8080", web.Auth{User: "u", Password: "p"}, true},
		{"8080", token, false}, // no host:port
	} {
		err := web.CheckListen(tc.addr, tc.auth)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, %+v) = %v, want ok=%v", tc.addr, tc.auth, err, tc.ok)
		}
	}
}

func TestAuthFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		enabled bool
		err     bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{web.TokenEnv: "9f2c81d04be7a6135c0e"}, true, false},
		{map[string]string{web.TokenEnv: "t"}, false, true},                     // short
		{map[string]string{web.TokenEnv: " "}, false, true},                     // one space
		{map[string]string{web.TokenEnv: strings.Repeat("a", 32)}, false, true}, // not random-looking
		{map[string]string{web.TokenEnv: "9f2c81d04be7 a6135c0e"}, false, true}, // a space
		{map[string]string{web.UserEnv: "u", web.PasswordEnv: "p"}, true, false},
		{map[string]string{web.UserEnv: "u"}, false, true},
		{map[string]string{web.PasswordEnv: "p"}, false, true},
	} {
		a, err := web.AuthFromEnv(func(k string) string { return tc.env[k] })
		if (err != nil) != tc.err || a.Enabled() != tc.enabled {
			t.Errorf("env %v: auth enabled %v, error %v", tc.env, a.Enabled(), err)
		}
	}
}
