package cli_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHealthcheck probes a real HTTP server: 200 is healthy (exit 0, its
// body on stdout), 503 is unhealthy (exit 1 with the reason), a closed port
// is unhealthy, and a URL that is not http(s) is the user's to fix (exit 2).
func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "redis: connection refused", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/healthz"
	l.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"healthy", []string{srv.URL + "/healthz"}, 0, ""},
		{"unhealthy", []string{srv.URL + "/other"}, 1, "503 Service Unavailable: redis: connection refused"},
		{"nothing listening", []string{closed}, 1, "connection refused"},
		{"not a URL", []string{"127.0.0.1:8081"}, 2, "is not an http(s) URL"},
		{"two URLs", []string{srv.URL, srv.URL}, 2, "accepts at most 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, run := range []func(testing.TB, ...string) outcome{worker, producer} {
				o := run(t, append([]string{"healthcheck"}, tc.args...)...)
				if tc.code == 0 {
					o.wantCode(t, 0)
					if o.stdout != "ok\n" {
						t.Errorf("stdout %q, want the body's first line", o.stdout)
					}
					continue
				}
				name := "worker"
				if o.stderr != "" && o.stderr[0] == 'p' {
					name = "producer"
				}
				o.wantError(t, name, tc.code, tc.want)
			}
		})
	}
}
