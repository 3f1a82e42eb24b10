package fleetsim

import (
	"net"
	"net/http"
	"testing"
)

// httptestServer serves h on a free loopback port until the test ends and
// returns its base URL.
func httptestServer(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
