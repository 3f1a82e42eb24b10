package webhook_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/webhook"
)

// fast is a policy for tests: waits of milliseconds, not seconds.
func fast(forDur time.Duration) webhook.Policy {
	return webhook.Policy{For: forDur, Initial: 5 * time.Millisecond, Max: 40 * time.Millisecond, Timeout: 2 * time.Second}
}

// receiver is a webhook on loopback that keeps every try's delivery id
// and answers as answer says for the n-th try (from 1).
type receiver struct {
	mu  sync.Mutex
	ids []string
}

func (r *receiver) handler(answer func(n int, w http.ResponseWriter) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get(webhook.HeaderDelivery))
		n := len(r.ids)
		r.mu.Unlock()
		if answer == nil || !answer(n, w) {
			w.Write([]byte("ok"))
		}
	})
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.ids...)
}

// TestDownThenUpIsDeliveredOnce: a receiver whose address refuses
// connections (its listener closed) for a while and then comes up gets
// the body exactly once, with the delivery id the tries all carried. (On
// main a refused connection lost the alert for good.)
func TestDownThenUpIsDeliveredOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // down: connection refused

	var tries atomic.Int32
	down := make(chan struct{})
	p := fast(time.Minute)
	p.Beat = func(_ context.Context, n int) error {
		if n > 0 && tries.Add(1) == 4 {
			close(down) // three refused tries so far: bring it up
		}
		return nil
	}
	ids := webhook.IDs{Event: "nightly-report-x", Delivery: webhook.NewID()}
	var rec receiver
	go func() {
		<-down
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: rec.handler(nil)}}
		srv.Start()
		t.Cleanup(srv.Close)
	}()
	res, err := webhook.Post(context.Background(), "http://"+addr+"/hooks/T/B/X", []byte(`{"text":"x"}`), ids, p)
	if err != nil {
		t.Fatalf("post: %v (%d tries)", err, res.Attempts)
	}
	got := rec.got()
	if len(got) != 1 || got[0] != ids.Delivery {
		t.Fatalf("receiver got %q, want exactly one post with delivery id %s", got, ids.Delivery)
	}
	if res.Attempts < 4 {
		t.Errorf("%d tries, want at least 4 (3 refused)", res.Attempts)
	}
}

// TestRetries: which answers are tried again, and that every try of one
// delivery carries its one id.
func TestRetries(t *testing.T) {
	status := func(codes ...int) func(int, http.ResponseWriter) bool {
		return func(n int, w http.ResponseWriter) bool {
			if n <= len(codes) {
				w.WriteHeader(codes[n-1])
				return true
			}
			return false
		}
	}
	for _, tc := range []struct {
		name     string
		answer   func(int, http.ResponseWriter) bool
		forDur   time.Duration
		posts    int
		wantErr  error
		minWaits time.Duration
	}{
		{name: "2xx is never tried again", posts: 1},
		{name: "5xx then 2xx", answer: status(500, 502, 503), posts: 4},
		{name: "408 is tried again", answer: status(408), posts: 2},
		{name: "a 4xx is not tried again", answer: status(404), posts: 1, wantErr: webhook.ErrRefused},
		{name: "400 is not tried again", answer: status(400), posts: 1, wantErr: webhook.ErrRefused},
		{name: "429 honours Retry-After", answer: func(n int, w http.ResponseWriter) bool {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		}, posts: 2, minWaits: time.Second},
		{name: "Retry-After past the window gives up", answer: func(n int, w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}, posts: 1, wantErr: webhook.ErrGaveUp},
		{name: "5xx for good gives up when the window is spent", answer: func(_ int, w http.ResponseWriter) bool {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}, forDur: 150 * time.Millisecond, wantErr: webhook.ErrGaveUp},
		{name: "dropped connections give up when the window is spent", answer: func(int, http.ResponseWriter) bool {
			panic(http.ErrAbortHandler) // the connection drops: no answer at all
		}, forDur: 150 * time.Millisecond, wantErr: webhook.ErrGaveUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec receiver
			srv := httptest.NewServer(rec.handler(tc.answer))
			t.Cleanup(srv.Close)
			ids := webhook.IDs{Event: "e", Delivery: webhook.NewID()}
			start := time.Now()
			res, err := webhook.Post(context.Background(), srv.URL+"/secret/path", []byte(`{}`), ids, fast(cmp.Or(tc.forDur, time.Minute)))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil && (res.Last == nil || containsSecret(err)) {
				t.Errorf("err %v: want the last error and no secret path", err)
			}
			got := rec.got()
			if tc.posts > 0 && len(got) != tc.posts {
				t.Errorf("%d posts, want %d", len(got), tc.posts)
			}
			if tc.posts == 0 && len(got) < 2 {
				t.Errorf("%d posts, want several before giving up", len(got))
			}
			for _, id := range got {
				if id != ids.Delivery {
					t.Errorf("a try carried delivery id %q, want %q on every one", id, ids.Delivery)
				}
			}
			if res.Attempts != len(got) {
				t.Errorf("%d attempts counted, the receiver saw %d", res.Attempts, len(got))
			}
			if d := time.Since(start); d < tc.minWaits {
				t.Errorf("took %s, want at least %s (Retry-After)", d, tc.minWaits)
			}
		})
	}
}

// A try that gets no answer within the timeout is tried again with the
// same id: a receiver that got both de-duplicates.
func TestTimeoutIsTriedAgainWithTheSameID(t *testing.T) {
	var rec receiver
	srv := httptest.NewServer(rec.handler(func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			time.Sleep(300 * time.Millisecond)
		}
		return false
	}))
	t.Cleanup(srv.Close)
	p := fast(time.Minute)
	p.Timeout = 100 * time.Millisecond
	ids := webhook.IDs{Delivery: webhook.NewID()}
	if _, err := webhook.Post(context.Background(), srv.URL, []byte(`{}`), ids, p); err != nil {
		t.Fatal(err)
	}
	if got := rec.got(); len(got) != 2 || got[0] != ids.Delivery || got[1] != ids.Delivery {
		t.Errorf("tries carried %q, want two of %s", got, ids.Delivery)
	}
}

func TestNewIDsDiffer(t *testing.T) {
	a, b := webhook.NewID(), webhook.NewID()
	if a == b || len(a) != 32 {
		t.Errorf("ids %q %q", a, b)
	}
}

func containsSecret(err error) bool { return strings.Contains(err.Error(), "secret") }
