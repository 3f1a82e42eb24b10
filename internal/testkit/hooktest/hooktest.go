package hooktest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Receiver starts a receiver that answers 200 to every POST and keeps its
// body; it stops when the test ends. url looks like a Slack incoming
// webhook's (…/hooks/T/B/X); bodies returns a copy of what came so far.
func Receiver(t testing.TB) (url string, bodies func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hooks/T/B/X", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string{}, got...)
	}
}
