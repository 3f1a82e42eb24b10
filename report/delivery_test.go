package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/state"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/webhook"
)

// post is one POST a receiver got.
type post struct {
	delivery, event string
	body            report.Webhook
}

// posts keeps what a receiver got.
type posts struct {
	mu  sync.Mutex
	got []post
	// hold, when set, keeps each post's answer until release is called
	// (or a second post arrives, which releases both): what is sent at
	// once cannot finish before the others have decided.
	hold    chan struct{}
	release func()
	held    int
}

func (p *posts) handler(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var b report.Webhook
	json.Unmarshal(data, &b)
	p.mu.Lock()
	p.got = append(p.got, post{r.Header.Get(webhook.HeaderDelivery), r.Header.Get(webhook.HeaderEvent), b})
	hold := p.hold
	if hold != nil {
		if p.held++; p.held >= 2 {
			p.release()
		}
	}
	p.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

// holdPosts makes p hold each post's answer until the returned release
// is called or a second post arrives.
func (p *posts) holdPosts() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hold := make(chan struct{})
	var once sync.Once
	p.hold, p.held = hold, 0
	p.release = func() { once.Do(func() { close(hold) }) }
	return p.release
}

func (p *posts) all() []post {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]post{}, p.got...)
}

// newsPlan writes a plan whose one entry was not submitted (a failure:
// news the webhook tells) and returns its nightly id.
func newsPlan(t *testing.T, store artifacts.Store, id string) string {
	t.Helper()
	putPlan(t, store, state.Plan{Nightly: id, Entries: []state.PlanEntry{
		{Model: "m", Target: "cpu", Outcome: state.OutcomeFailed, Error: "bundle missing"},
	}})
	return id
}

// TestReceiverDownThenUpGetsTheReportOnce: a webhook receiver that is
// down (connection refused: its listener closed) while the morning report
// is sent, and comes up a few tries later, gets the report exactly once,
// with the delivery id every try carried in its header and body and the
// nightly's event id; the marker says delivered and how many tries it
// took. (On main the report said `delivery_unknown`, exit 0, and the
// alert was lost for good.)
func TestReceiverDownThenUpGetsTheReportOnce(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := newsPlan(t, store, "2026-12-01-eeeeeeeeeeee")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the receiver is down

	var p posts
	up := make(chan struct{})
	var srv *httptest.Server
	go func() {
		// Up once three tries were refused (the fourth is recorded
		// before it is made).
		for ctx.Err() == nil {
			if m, _ := report.ReadMarker(ctx, store, id); m != nil && m.Attempts >= 4 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			close(up)
			return
		}
		srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(p.handler)}}
		srv.Start()
		close(up)
	}()
	t.Cleanup(func() {
		<-up
		if srv != nil {
			srv.Close()
		}
	})
	s, sent, err := report.Morning(ctx, store, id, "http://"+addr+"/hooks/T/B/X", report.NotifyOptions{Policy: quick(time.Minute)})
	if err != nil || sent != report.NotifySent {
		t.Fatalf("morning report: %s, %v", sent, err)
	}
	m, err := report.ReadMarker(ctx, store, id)
	if err != nil || m == nil || m.Delivery != report.DeliveryDelivered || m.Attempts < 4 || m.DeliveredAt == nil {
		t.Fatalf("marker %+v (%v): want delivered after at least 4 tries", m, err)
	}
	got := p.all()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d posts, want exactly 1", len(got))
	}
	if g := got[0]; g.delivery != m.DeliveryID || g.body.DeliveryID != m.DeliveryID || g.event != report.EventID(id) || g.body.EventID != g.event || !strings.Contains(g.body.Text, "bundle missing") {
		t.Errorf("post %+v, want delivery %s and event %s in headers and body", g, m.DeliveryID, report.EventID(id))
	}
	if s.Webhook == nil || s.Webhook.Delivery != report.DeliveryDelivered {
		t.Errorf("summary's webhook_delivery %+v, want delivered", s.Webhook)
	}
}

// TestFailedDeliveryIsInTheMorningReport: when every try fails the
// morning report says so — summary.json, report.html and `nightly show`'s
// summary — with the last error, and the next report delivers the same
// delivery (its id) once the receiver answers.
func TestFailedDeliveryIsInTheMorningReport(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := newsPlan(t, store, "2026-12-01-ffffffffffff")
	var p posts
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
		}
		p.handler(w, r)
	}))
	t.Cleanup(srv.Close)

	// A window of a few tries at the quick policy's 5–40 ms backoff, wide
	// enough that a loaded machine still makes two (at 100 ms, load 120
	// once allowed only one).
	_, sent, err := report.Morning(ctx, store, id, srv.URL, report.NotifyOptions{Policy: quick(2 * time.Second)})
	if sent != report.NotifyFailed || !errors.Is(err, webhook.ErrGaveUp) {
		t.Fatalf("morning report: %s, %v; want failed, gave up", sent, err)
	}
	var sum report.Summary
	if err := artifacts.GetJSON(ctx, store, report.SummaryKey(id), &sum); err != nil {
		t.Fatal(err)
	}
	if w := sum.Webhook; w == nil || w.Delivery != report.DeliveryFailed || !strings.Contains(w.LastError, "502") || w.Attempts < 2 {
		t.Fatalf("summary.json's webhook_delivery %+v, want failed with the 502", w)
	}
	page := readKey(t, store, report.ReportKey(id))
	if !strings.Contains(page, `id="webhook-delivery" class="failed"`) || !strings.Contains(page, "webhook NOT delivered") || !strings.Contains(page, "502") {
		t.Errorf("report.html does not say the delivery failed:\n%s", page)
	}
	shown, err := report.Show(ctx, store, id)
	if err != nil || !strings.Contains(shown.Webhook.Line(), "NOT delivered") {
		t.Errorf("nightly show: %v, %q", err, shown.Webhook.Line())
	}
	failedID := sum.Webhook.DeliveryID

	down.Store(false)
	s, sent, err := report.Morning(ctx, store, id, srv.URL, report.NotifyOptions{Policy: quick(time.Minute)})
	if err != nil || sent != report.NotifySent {
		t.Fatalf("the next report: %s, %v", sent, err)
	}
	got := p.all()
	for _, g := range got {
		if g.delivery != failedID {
			t.Errorf("a try carried %s, want the failed delivery's %s", g.delivery, failedID)
		}
	}
	if s.Webhook == nil || s.Webhook.Delivery != report.DeliveryDelivered || s.Webhook.Attempts != len(got) {
		t.Errorf("webhook_delivery %+v after %d posts", s.Webhook, len(got))
	}
	if page := readKey(t, store, report.ReportKey(id)); !strings.Contains(page, "webhook delivered at") {
		t.Errorf("report.html after delivery lacks it:\n%s", page)
	}
}

// TestResendWithRedis: with a real redis-server's claim (kept 90 days), a
// delivered report is not sent again, and --resend (Resend) sends it
// again as a new delivery of the same event; two resends at once send
// one. (On main the claim made every later report say already_sent, and
// deleting notified.json did nothing.)
func TestResendWithRedis(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: testsvc.OwnRedis(t, testsvc.RedisOptions{}).Addr})
	t.Cleanup(func() { rdb.Close() })
	id := newsPlan(t, store, "2026-12-01-aaaaaaaaaaa1")
	var p posts
	srv := httptest.NewServer(http.HandlerFunc(p.handler))
	t.Cleanup(srv.Close)
	o := report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}, Policy: quick(time.Minute)}
	resend := o
	resend.Resend = true

	for i, want := range []string{report.NotifySent, report.NotifyAlreadySent, report.NotifyAlreadySent} {
		if _, sent, err := report.Morning(ctx, store, id, srv.URL, o); err != nil || sent != want {
			t.Fatalf("report %d: %s, %v; want %s", i+1, sent, err, want)
		}
	}
	// Two resends at once: one sends, the other finds it in flight or
	// sent. The receiver holds a post until the other resend has decided
	// (it returns) or posted too: "at once" whatever the machine's load
	// (a resend that starts after the other delivered is a second resend).
	release := p.holdPosts()
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			_, r, err := report.Morning(ctx, store, id, srv.URL, resend)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	p.mu.Lock()
	p.hold = nil
	p.mu.Unlock()
	// Counted whole: "already_sent" holds "sent" too.
	if n := slices.Index(results, report.NotifySent); n < 0 || slices.Contains(results[n+1:], report.NotifySent) {
		t.Errorf("two resends at once: %q, want one sent", results)
	}
	if _, sent, err := report.Morning(ctx, store, id, srv.URL, o); err != nil || sent != report.NotifyAlreadySent {
		t.Errorf("a report after the resend: %s, %v; want %s", sent, err, report.NotifyAlreadySent)
	}
	got := p.all()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d posts, want 2 (the report and one resend)", len(got))
	}
	if got[0].delivery == got[1].delivery || got[0].event != got[1].event || got[1].event != report.EventID(id) {
		t.Errorf("posts %+v: want two delivery ids of one event", got)
	}
	if m, _ := report.ReadMarker(ctx, store, id); m == nil || m.Resends != 1 || m.DeliveryID != got[1].delivery {
		t.Errorf("marker %+v", m)
	}
}

func readKey(t *testing.T, store artifacts.Store, key string) string {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeviceTimeNamesTheDevicesUsed: a CPU-only nightly's webhook and
// report say CPU-min and draw no GPU bars, even with nothing spent (all
// reused); a mixed one names both. (On main a CPU-only night whose device
// time was zero said "0.0 GPU-min".)
func TestDeviceTimeNamesTheDevicesUsed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices []string
		want    string
		not     string
	}{
		{"cpu only", []string{"cpu", "cpu"}, "0.0 CPU-min spent, 0.0 CPU-min saved", "GPU"},
		{"gpu only", []string{"NVIDIA H100"}, "0.0 GPU-min spent, 0.0 GPU-min saved", "CPU"},
		{"mixed", []string{"cpu", "NVIDIA H100"}, "0.0 GPU-min + 0.0 CPU-min spent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := news("n1")
			for i, d := range tc.devices {
				s.Entries = append(s.Entries, report.Entry{Model: fmt.Sprint("m", i), Target: "t", Status: report.StatusDone, Device: d})
			}
			body := report.WebhookBody(s).Text
			if !strings.Contains(body, tc.want) || (tc.not != "" && strings.Contains(body, tc.not+"-min")) {
				t.Errorf("webhook %q: want %q and no %s-min", body, tc.want, tc.not)
			}
			var page strings.Builder
			if err := report.RenderHTML(&page, s, report.Links{}); err != nil {
				t.Fatal(err)
			}
			if tc.not != "" && strings.Contains(page.String(), tc.not+" spent") {
				t.Errorf("report.html draws %s bars for a nightly that ran on none", tc.not)
			}
		})
	}
}

// TestWarnIsTriedAgain: a deadline warning is a delivery of its own: a
// 503 is tried again with the same delivery id, and the body carries it.
func TestWarnIsTriedAgain(t *testing.T) {
	var p posts
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
		p.handler(w, r)
	}))
	t.Cleanup(srv.Close)
	if err := report.Warn(context.Background(), srv.URL, "*tunefleet*: late", quick(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := p.all()
	if len(got) != 2 || got[0].delivery == "" || got[0].delivery != got[1].delivery || got[1].body.DeliveryID != got[1].delivery || got[1].body.Text != "*tunefleet*: late" {
		t.Errorf("posts %+v: want two tries of one delivery", got)
	}
}

// TestUnknownMarkerIsDeliveredAgain: a marker from before deliveries
// were retried ("unknown": no answer came, and its Redis claim was kept
// for 90 days) is delivered again, once, under a claim of its own.
func TestUnknownMarkerIsDeliveredAgain(t *testing.T) {
	ctx := context.Background()
	store, _, rdb := markerBed(t)
	claim := report.RedisClaimer{RDB: rdb}
	key := report.NotifiedKey("n1")
	if err := artifacts.PutJSON(ctx, store, key, report.Marker{Nightly: "n1", Delivery: report.DeliveryUnknown}); err != nil {
		t.Fatal(err)
	}
	if ok, err := claim.Claim(ctx, key); !ok || err != nil {
		t.Fatal(ok, err)
	}
	claim.Done(ctx, key) // what the old code left
	h := newHook(t)
	for i, want := range []string{report.NotifySent, report.NotifyAlreadySent} {
		if got, err := report.Notify(ctx, store, news("n1"), h.srv.URL, report.NotifyOptions{Claim: claim, Policy: quick(time.Minute)}); err != nil || got != want {
			t.Errorf("report %d: %s, %v; want %s", i+1, got, err, want)
		}
	}
	if h.n.Load() != 1 {
		t.Errorf("%d posts, want 1", h.n.Load())
	}
}
