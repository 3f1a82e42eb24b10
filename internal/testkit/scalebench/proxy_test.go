package scalebench

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// countingProxy is an HTTP reverse proxy in front of versitygw that counts
// requests by method and kind of key. It sits at the HTTP level, below
// whatever the store does (parallel parts, retries, HEADs before PUTs), so
// the counts are the requests S3 really sees. It keeps the client's Host
// header, so SigV4 signatures stay valid.
type countingProxy struct {
	URL string

	mu     sync.Mutex
	counts map[string]int // "METHOD kind"
}

func startCountingProxy(tb testing.TB, target string) *countingProxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{URL: "http://" + ln.Addr().String(), counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	// Enough idle connections that a parallel client reuses them instead
	// of paying a dial per request through the proxy.
	rp.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[r.Method+" "+keyKind(r.URL)]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return p
}

// keyKind classes a request's object key: run.json, result index, blob,
// other manifests, or the bucket itself (list, location).
func keyKind(u *url.URL) string {
	path := strings.TrimPrefix(u.Path, "/")
	_, key, ok := strings.Cut(path, "/") // path-style: bucket/key
	switch {
	case !ok || key == "":
		return "bucket"
	case strings.HasSuffix(key, "/run.json"):
		return "run.json"
	case strings.HasPrefix(key, "results/"):
		return "index"
	case strings.HasPrefix(key, "blobs/"):
		if u.Query().Has("uploadId") || u.Query().Has("uploads") {
			return "blob-multipart"
		}
		return "blob"
	default:
		return "other"
	}
}

// reset zeroes the counts and returns them.
func (p *countingProxy) reset() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = map[string]int{}
	return c
}

// sum adds the counts whose "METHOD kind" starts with prefix.
func sum(c map[string]int, prefix string) int {
	n := 0
	for k, v := range c {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// describe prints counts sorted, e.g. "HEAD blob=600 PUT blob=602".
func describe(c map[string]int) string {
	var ks []string
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}
