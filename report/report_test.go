package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/webhook"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// hook is a local webhook receiver that counts and keeps what it got.
type hook struct {
	srv    *httptest.Server
	n      atomic.Int32
	mu     sync.Mutex
	bodies []report.Webhook
	ids    []string // each post's X-Tunefleet-Delivery
	events []string // each post's X-Tunefleet-Event
	fail   atomic.Bool
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.fail.Load() {
			http.Error(w, "no_service", http.StatusInternalServerError)
			return
		}
		var b report.Webhook
		data, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(data, &b) != nil || b.Text == "" {
			t.Errorf("webhook got %s %s %q", r.Method, r.Header.Get("Content-Type"), data)
		}
		h.n.Add(1)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.ids = append(h.ids, r.Header.Get(webhook.HeaderDelivery))
		h.events = append(h.events, r.Header.Get(webhook.HeaderEvent))
		h.mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// mlpBundle records a one-graph MLP bundle, reference outputs from ORT.
func mlpBundle(t *testing.T) *bundle.Bundle { return mlpBundleOf(t, 32) }

// mlpBundleOf is mlpBundle with hidden units in its hidden layer: another
// version of the same model (tests.MLP, graph 0) for another width.
func mlpBundleOf(t *testing.T, hidden int) *bundle.Bundle {
	t.Helper()
	orttest.Need(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(16, hidden, 4).Write(model); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Ranges: []string{"input:1x16..8x16"}, Samples: 2, Seed: 1, IntHi: 9, Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(), Model: "tests.MLP",
	}); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nightlyBed is what a nightly's report is made on here: a local store
// under root, an embedded queue with two cpu slots and a client of it, a
// webhook receiver, and the MLP bundle to tune.
type nightlyBed struct {
	root  string
	store artifacts.Store
	e     *jobs.Embedded
	c     *jobs.Client
	h     *hook
	b     *bundle.Bundle
}

func newNightlyBed(t *testing.T) *nightlyBed {
	t.Helper()
	n := &nightlyBed{root: t.TempDir()}
	var err error
	if n.store, err = artifacts.NewLocal(n.root); err != nil {
		t.Fatal(err)
	}
	n.e, err = jobs.StartEmbedded(jobs.WorkerConfig{Store: n.store, Backends: backend.Registry{"ort": ort.New(ort.Options{})},
		Queues: []string{"cpu"}, Concurrency: 2, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	n.c = jobs.NewClient(n.e.Redis, n.store)
	t.Cleanup(func() { n.c.Close(); n.e.Close() })
	n.h = newHook(t)
	n.b = mlpBundle(t)
	return n
}

// tune runs the bundle through the embedded queue (a new run each call:
// Force) and waits for it to be final.
func tune(t *testing.T, e *jobs.Embedded, c *jobs.Client, b *bundle.Bundle, nightly string) runstate.RunStatus {
	t.Helper()
	return tuneWith(t, e, c, b, nightly, "ort:cpu:basic,ort:cpu:extended")
}

func tuneWith(t *testing.T, e *jobs.Embedded, c *jobs.Client, b *bundle.Bundle, nightly, candidates string) runstate.RunStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cands, err := backend.ParseCandidates(candidates)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(ctx, b, jobs.SubmitOptions{Target: "cpu", Strategy: mustStrategy(t), Candidates: cands,
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, BenchTime: 20 * time.Millisecond, Force: true, Nightly: nightly})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := c.Runs().Get(ctx, sub.Run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s did not finish", sub.Run)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func mustStrategy(t *testing.T) strategy.Strategy {
	s, err := strategy.Parse(strategy.MaxThroughput, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putPlan(t *testing.T, store artifacts.Store, p state.Plan) *state.Plan {
	t.Helper()
	p.Format, p.FleetDigest, p.CreatedAt = state.PlanFormat, "sha256:"+strings.Repeat("ab", 32), time.Now().UTC()
	if err := artifacts.PutJSON(context.Background(), store, state.PlanKey(p.Nightly), p); err != nil {
		t.Fatal(err)
	}
	got, err := report.ReadPlan(context.Background(), store, p.Nightly)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// slowDown rewrites a run's history entry on its platform as if its
// winner had measured ten times slower, spread unchanged: the
// regression a perturbed night would record.
func slowDown(t *testing.T, store artifacts.Store, st runstate.RunStatus, model string) {
	t.Helper()
	ctx := context.Background()
	e, _, err := history.Find(ctx, store, model, st.Platform, st.Run)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range e.Graphs {
		b := g.Bench
		b.MeanMs, b.P50Ms, b.P90Ms, b.P99Ms, b.Throughput = 10*b.MeanMs, 10*b.P50Ms, 10*b.P90Ms, 10*b.P99Ms, b.Throughput/10
		// and the robust estimate and its rounds, which the noise rule compares
		b.EstimateMs *= 10
		for i := range b.RoundMs {
			b.RoundMs[i] *= 10
		}
		t.Logf("graph %s: cv %.3f, p50 %.4g, p90 %.4g ms", g.Name, b.CV, b.P50Ms/10, b.P90Ms/10)
	}
	if err := artifacts.PutJSON(ctx, store, e.Key(), e); err != nil {
		t.Fatal(err)
	}
}

func readDoc(t *testing.T, root, key string, doc schemas.Doc) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	if doc != "" {
		if _, err := schemas.ValidateJSON(doc, "", raw); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	return raw
}

func TestNightlyReportsARegressionAndNotifiesOnce(t *testing.T) {
	ctx := context.Background()
	n := newNightlyBed(t)
	root, store, e, c, h, b := n.root, n.store, n.e, n.c, n.h, n.b
	claim := report.RedisClaimer{RDB: e.Redis}

	// Night 1: a cold run; the first entry of its history has nothing to
	// compare with, so no news, and no webhook.
	r1 := tune(t, e, c, b, "2026-12-01-aaaaaaaaaaaa")
	night1 := putPlan(t, store, state.Plan{Nightly: "2026-12-01-aaaaaaaaaaaa", Entries: []state.PlanEntry{
		{Model: "tests.MLP", Target: "cpu", Run: r1.Run, Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1},
	}})
	s1, err := report.Nightly(ctx, store, night1, report.Links{})
	if err != nil {
		t.Fatal(err)
	}
	if s1.Totals.Done != 1 || s1.Totals.Regressions != 0 || s1.Entries[0].PreviousRun != "" || s1.Totals.CPUSecondsSpent <= 0 {
		t.Fatalf("night 1 totals %+v entry %+v", s1.Totals, s1.Entries[0])
	}
	if sent, err := report.Notify(ctx, store, s1, h.srv.URL, report.NotifyOptions{Claim: claim}); err != nil || sent != report.NotifyNoNews {
		t.Fatalf("night 1 notify: %s %v", sent, err)
	}

	// Night 2: every graph reused (unchanged), but its entry says it got
	// three times slower; and one model could not be submitted.
	r2 := tune(t, e, c, b, "2026-12-02-aaaaaaaaaaaa")
	if got, _, err := history.Find(ctx, store, "tests.MLP", "cpu", r2.Run); err != nil || got.Nightly != "2026-12-02-aaaaaaaaaaaa" {
		t.Fatalf("night 2's history entry: %+v %v, want its nightly id", got, err)
	}
	slowDown(t, store, r2, "tests.MLP")
	night2 := putPlan(t, store, state.Plan{Nightly: "2026-12-02-aaaaaaaaaaaa", Entries: []state.PlanEntry{
		{Model: "tests.MLP", Target: "cpu", Run: r2.Run, Outcome: state.OutcomeUnchanged, Graphs: 1, Reused: 1},
		{Model: "tests.Gone", Target: "cpu", Outcome: state.OutcomeFailed, Error: "bundle bundles/gone.tgz is not in the store"},
	}})
	for range 2 { // a retry (or a second replica) sends nothing new
		s2, err := report.Nightly(ctx, store, night2, report.Links{})
		if err != nil {
			t.Fatal(err)
		}
		// Failures first: the entry not submitted leads, the plan's order aside.
		if s2.Entries[0].Model != "tests.Gone" {
			t.Fatalf("night 2 lists %s first, want the failed tests.Gone", s2.Entries[0].Model)
		}
		if s2.Totals.Regressions != 1 || s2.Totals.Failed != 1 || s2.Totals.Unchanged != 1 || s2.Entries[1].PreviousRun != r1.Run {
			t.Fatalf("night 2 totals %+v entries %+v", s2.Totals, s2.Entries)
		}
		if s2.Totals.CPUSecondsSaved <= 0 || s2.Entries[1].SpentSeconds != 0 {
			t.Errorf("night 2 reused everything: %+v", s2.Entries[1])
		}
		if ch := s2.Entries[1].Changes; len(ch) != 1 || ch[0].Kind != history.ChangeSlower || !ch[0].Regression {
			t.Fatalf("night 2 changes %+v", ch)
		}
		if _, err := report.Notify(ctx, store, s2, h.srv.URL, report.NotifyOptions{Claim: claim}); err != nil {
			t.Fatal(err)
		}
	}
	if h.n.Load() != 1 {
		t.Fatalf("webhook received %d posts, want 1", h.n.Load())
	}
	body := h.bodies[0].Text
	for _, want := range []string{"2026-12-02-aaaaaaaaaaaa", "1 regression", "tests.MLP on cpu graph 0 slower", "tests.Gone on cpu: not submitted"} {
		if !strings.Contains(body, want) {
			t.Errorf("webhook text lacks %q:\n%s", want, body)
		}
	}
	readDoc(t, root, report.SummaryKey(night2.Nightly), schemas.Summary)
	readDoc(t, root, report.SummaryKey(night1.Nightly), schemas.Summary)
	page := string(readDoc(t, root, report.ReportKey(night2.Nightly), ""))
	// Throughput in the charts' units (3.87M/s), never 3.873e+06/s.
	for _, want := range []string{"<svg", "slower", "tests.Gone", "not_submitted", r1.Run, "M/s"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "e+0") {
		t.Error("report.html prints a throughput in e-notation")
	}
	// Self-contained: nothing to fetch (the SVG namespace is a name, not a fetch).
	for _, bad := range []string{"<script", "<link", "src=", "url(", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html has %q", bad)
		}
	}
	if n := strings.Count(page, "http"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("report.html names %d URLs beyond the SVG namespace", n)
	}
	if os.Getenv("TUNEFLEET_REPORT_OUT") != "" { // to look at it: a browser screenshot
		os.WriteFile(os.Getenv("TUNEFLEET_REPORT_OUT"), []byte(page), 0o644)
	}
}

// breakGraphs rewrites a run's history entry on its platform as if every
// graph had failed: what a night whose candidates no longer build would
// record.
func breakGraphs(t *testing.T, store artifacts.Store, st runstate.RunStatus, model string) {
	t.Helper()
	ctx := context.Background()
	e, _, err := history.Find(ctx, store, model, st.Platform, st.Run)
	if err != nil {
		t.Fatal(err)
	}
	e.Status = history.GraphFailed
	for i := range e.Graphs {
		e.Graphs[i].Status, e.Graphs[i].Candidate, e.Graphs[i].Bench = history.GraphFailed, "", nil
		e.Graphs[i].Failure = &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "output 0 differs"}
	}
	if err := artifacts.PutJSON(ctx, store, e.Key(), e); err != nil {
		t.Fatal(err)
	}
}

// TestSettingsChangeIsNotARegression: a nightly whose candidates changed
// and whose graph then failed says "settings changed" — in the summary,
// report.html and the webhook — not "newly failing", and counts no
// regression; report.html links its runs to --ui-url.
func TestSettingsChangeIsNotARegression(t *testing.T) {
	ctx := context.Background()
	n := newNightlyBed(t)
	root, store, e, c, h, b := n.root, n.store, n.e, n.c, n.h, n.b
	r1 := tuneWith(t, e, c, b, "2026-12-01-bbbbbbbbbbbb", "ort:cpu:basic,ort:cpu:extended")
	r2 := tuneWith(t, e, c, b, "2026-12-02-bbbbbbbbbbbb", "ort:cpu:disabled")
	breakGraphs(t, store, r2, "tests.MLP")
	plan := putPlan(t, store, state.Plan{Nightly: "2026-12-02-bbbbbbbbbbbb", Notify: h.srv.URL, Entries: []state.PlanEntry{
		{Model: "tests.MLP", Target: "cpu", Run: r2.Run, Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1},
	}})
	s, sent, err := report.MorningLinked(ctx, store, plan.Nightly, "", report.NotifyOptions{Claim: report.RedisClaimer{RDB: e.Redis}}, report.UILinks("http://ui.example:8080/"))
	if err != nil || sent != report.NotifySent {
		t.Fatalf("morning report: %s %v", sent, err)
	}
	en := s.Entries[0]
	if s.Totals.Regressions != 0 || s.Totals.NewlyFailing != 0 || s.Totals.SettingsChanged != 1 || en.PreviousRun != r1.Run {
		t.Fatalf("totals %+v, entry %+v: want no regression, one settings change, compared with %s", s.Totals, en, r1.Run)
	}
	if want := "candidates ort:cpu:basic,ort:cpu:extended → ort:cpu:disabled"; !strings.Contains(en.SettingsChanged, want) {
		t.Errorf("settings changed %q, want it to say %q", en.SettingsChanged, want)
	}
	var graph *history.Change
	for i, ch := range en.Changes {
		if ch.Graph == "0" {
			graph = &en.Changes[i]
		}
	}
	if graph == nil || graph.Kind != history.ChangeSettings || graph.Was != history.ChangeNewlyFailing || graph.Regression {
		t.Fatalf("graph 0's change %+v, want settings_changed (was newly_failing), no regression", graph)
	}
	body := h.bodies[0].Text
	page := string(readDoc(t, root, report.ReportKey(plan.Nightly), ""))
	readDoc(t, root, report.SummaryKey(plan.Nightly), schemas.Summary)
	for what, text := range map[string]string{"webhook": body, "report.html": page} {
		if !strings.Contains(text, "settings changed") {
			t.Errorf("%s does not say settings changed:\n%s", what, text)
		}
		if strings.Contains(text, "newly failing") || strings.Contains(text, "newly_failing") {
			t.Errorf("%s says newly failing:\n%s", what, text)
		}
	}
	for _, want := range []string{`href="http://ui.example:8080/runs/` + r2.Run + `"`, `href="http://ui.example:8080/runs/` + r1.Run + `"`,
		`href="http://ui.example:8080/models/tests.MLP"`, `href="http://ui.example:8080/nightly/` + plan.Nightly + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks the link %s", want)
		}
	}
}

func news(id string) *report.Summary {
	return &report.Summary{Format: report.SummaryFormat, Nightly: id, Totals: report.Totals{Entries: 1, Failed: 1},
		Entries: []report.Entry{{Model: "m", Target: "cpu", Outcome: state.OutcomeFailed, Status: report.StatusNotSubmitted, Error: "bundle missing"}}}
}

// markerBed is a store for the webhook's marker and a Redis for its claim.
func markerBed(t *testing.T) (artifacts.Store, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return store, mr, rdb
}

func TestNotifyOnceAcrossReplicasAndRetriesAFailedSend(t *testing.T) {
	ctx := context.Background()
	store, _, rdb := markerBed(t)
	h := newHook(t)

	// The receiver fails for the whole (short) window: the marker says
	// failed with the last error, and the next report tries again.
	h.fail.Store(true)
	got, err := report.Notify(ctx, store, news("n1"), h.srv.URL+"/secret/token", report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}, Policy: quick(100 * time.Millisecond)})
	if got != report.NotifyFailed || !errors.Is(err, webhook.ErrGaveUp) || !strings.Contains(err.Error(), "500") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("failed send: %s, %v; want failed, the status without the URL's secret path", got, err)
	}
	if m, _ := report.ReadMarker(ctx, store, "n1"); m == nil || m.Delivery != report.DeliveryFailed || !strings.Contains(m.LastError, "500") || m.Attempts < 2 || m.FailedAt == nil {
		t.Fatalf("marker after the failed send: %+v", m)
	}
	h.fail.Store(false)

	// Eight replicas at once, each with its own view of the store: one post.
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := report.Notify(ctx, store, news("n1"), h.srv.URL, report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}, Policy: quick(time.Minute)})
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	sent := 0
	for _, r := range results {
		if r == report.NotifySent {
			sent++
		} else if r != report.NotifyAlreadySent && r != report.NotifyInFlight {
			t.Errorf("replica: %s", r)
		}
	}
	if sent != 1 || h.n.Load() != 1 {
		t.Fatalf("%d replicas sent, receiver got %d posts; want 1 and 1", sent, h.n.Load())
	}
	// The retry was the failed delivery's, with its id.
	if m, _ := report.ReadMarker(ctx, store, "n1"); m == nil || m.Delivery != report.DeliveryDelivered || h.ids[0] != m.DeliveryID {
		t.Errorf("marker %+v, receiver saw delivery %q", m, h.ids)
	}
	// Pending runs hold the webhook back; a summary without news sends none.
	pending := news("n2")
	pending.Totals.Pending = 1
	quiet := &report.Summary{Nightly: "n3", Totals: report.Totals{Entries: 1, Done: 1}}
	for s, want := range map[*report.Summary]string{pending: report.NotifyPending, quiet: report.NotifyNoNews} {
		if got, err := report.Notify(ctx, store, s, h.srv.URL, report.NotifyOptions{}); err != nil || got != want {
			t.Errorf("nightly %s: %s %v, want %s", s.Nightly, got, err, want)
		}
	}
	if h.n.Load() != 1 {
		t.Fatalf("receiver got %d posts", h.n.Load())
	}
}

func TestBadNightlyAndURLAreRefused(t *testing.T) {
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../x", "a/b", "", ".hidden"} {
		if _, err := report.ReadPlan(context.Background(), store, id); err == nil {
			t.Errorf("nightly %q accepted", id)
		}
	}
	if _, err := report.ReadPlan(context.Background(), store, "2026-12-01-000000000000"); err == nil || !strings.Contains(err.Error(), "plan.json") {
		t.Errorf("missing plan: %v", err)
	}
	for _, u := range []string{"hooks.slack.com/x", "ftp://h/x", "http://"} {
		if report.CheckURL(u) == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
}

// A run with no history entry is pending until it is final; a cancelled
// one (it has a state.json, never a history entry) counts as failed and
// does not hold the webhook back.
func TestCancelledAndPendingRuns(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := artifacts.PutJSON(ctx, store, artifacts.StateKey("m-1"), map[string]any{"status": "cancelled", "reasons": []string{"cancelled at 2026-12-01T03:00:00Z"}}); err != nil {
		t.Fatal(err)
	}
	plan := putPlan(t, store, state.Plan{Nightly: "2026-12-01-cccccccccccc", Entries: []state.PlanEntry{
		{Model: "m", Target: "cpu", Run: "m-1", Outcome: state.OutcomeSubmitted},
		{Model: "n", Target: "cpu", Run: "n-1", Outcome: state.OutcomeSubmitted},
	}})
	s, err := report.Summarize(ctx, store, plan)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entries[0].Status != report.StatusCancelled || s.Entries[1].Status != report.StatusPending || s.Totals.Failed != 1 || s.Totals.Pending != 1 {
		t.Fatalf("totals %+v entries %+v", s.Totals, s.Entries)
	}
	h := newHook(t)
	if got, err := report.Notify(ctx, store, s, h.srv.URL, report.NotifyOptions{}); err != nil || got != report.NotifyPending {
		t.Fatalf("notify with a run pending: %s %v", got, err)
	}
	plan.Entries = plan.Entries[:1]
	s, _ = report.Summarize(ctx, store, plan)
	if got, err := report.Notify(ctx, store, s, h.srv.URL, report.NotifyOptions{}); err != nil || got != report.NotifySent || !strings.Contains(h.bodies[0].Text, "m-1 cancelled") {
		t.Fatalf("notify of a cancelled run: %s %v %v", got, err, h.bodies)
	}
}

// A receiver that answers 2xx only after the client gave up has the
// report, though the sender could not know: the try is made again with
// the same delivery id, so the receiver can drop the second, and the
// marker says delivered. (On main the report said "delivery unknown"
// and a receiver that never had it never got it.)
func TestSlowWebhookIsTriedAgainWithTheSameID(t *testing.T) {
	ctx := context.Background()
	store, _, rdb := markerBed(t)
	var mu sync.Mutex
	var ids []string
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		ids = append(ids, r.Header.Get(webhook.HeaderDelivery))
		first := len(ids) == 1
		mu.Unlock()
		if first {
			time.Sleep(400 * time.Millisecond) // past the client's timeout
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(slow.Close)
	p := quick(time.Minute)
	p.Timeout = 100 * time.Millisecond
	for i, want := range []string{report.NotifySent, report.NotifyAlreadySent} {
		got, err := report.Notify(ctx, store, news("n1"), slow.URL, report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}, Policy: p})
		if err != nil || got != want {
			t.Errorf("report %d: %q, %v; want %s", i+1, got, err, want)
		}
	}
	m, err := report.ReadMarker(ctx, store, "n1")
	if err != nil || m == nil || m.Delivery != report.DeliveryDelivered || m.Attempts != 2 {
		t.Fatalf("marker %+v (%v), want delivered in 2 tries", m, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != m.DeliveryID || ids[1] != m.DeliveryID {
		t.Errorf("tries carried %q, want two of %s", ids, m.DeliveryID)
	}
}

// A marker that says "sending" is a delivery in flight while its sender
// holds the claim, and a sender that died once the claim's lease is gone:
// the delivery is taken over with its id, so a receiver that had it
// drops it. Without Redis the marker's latest try says the same.
func TestSendingMarkerIsInFlightOrTakenOver(t *testing.T) {
	ctx := context.Background()
	store, mr, rdb := markerBed(t)
	h := newHook(t)
	key := report.NotifiedKey("n1")
	if err := artifacts.PutJSON(ctx, store, key, report.Marker{Nightly: "n1", Delivery: report.DeliverySending, DeliveryID: "d-1", Attempts: 1, TriedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	claim := report.RedisClaimer{RDB: rdb}
	if ok, err := claim.Claim(ctx, key); !ok || err != nil {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	o := report.NotifyOptions{Claim: claim, Policy: quick(time.Minute)}
	if got, err := report.Notify(ctx, store, news("n1"), h.srv.URL, o); err != nil || got != report.NotifyInFlight {
		t.Errorf("while the sender holds the claim: %q, %v; want %s", got, err, report.NotifyInFlight)
	}
	if got, err := report.Notify(ctx, store, news("n1"), h.srv.URL, report.NotifyOptions{}); err != nil || got != report.NotifyInFlight {
		t.Errorf("without Redis, a try just made: %q, %v; want %s", got, err, report.NotifyInFlight)
	}
	mr.FastForward(report.ClaimLease + time.Second) // the sender died: its lease lapses
	for i, want := range []string{report.NotifySent, report.NotifyAlreadySent} {
		if got, err := report.Notify(ctx, store, news("n1"), h.srv.URL, o); err != nil || got != want {
			t.Errorf("report %d after the sender's lease: %q, %v; want %s", i+1, got, err, want)
		}
	}
	if h.n.Load() != 1 || h.ids[0] != "d-1" {
		t.Errorf("the receiver got %d posts with ids %q, want one of the dead sender's d-1", h.n.Load(), h.ids)
	}
	if m, _ := report.ReadMarker(ctx, store, "n1"); m == nil || m.Attempts != 2 || m.DeliveryID != "d-1" {
		t.Errorf("marker %+v: want d-1 delivered on its second try", m)
	}
}

// quick is a delivery policy for tests: waits of milliseconds.
func quick(window time.Duration) webhook.Policy {
	return webhook.Policy{For: window, Initial: 5 * time.Millisecond, Max: 40 * time.Millisecond, Timeout: 5 * time.Second}
}

// TestNewVersionIsNotARegression: a nightly whose bundle was replaced by
// a heavier graph says "new version" with what changed — in the summary,
// report.html and the webhook — counts no regression however much slower
// the new graph is, and counts its change of winner even though the
// previous winner had tied with the new one (issue 30: nightly 2 paged
// "mlp graph 0 slower -66.6%, 1 regression(s)" and "winner_changes: 0").
func TestNewVersionIsNotARegression(t *testing.T) {
	ctx := context.Background()
	n := newNightlyBed(t)
	root, store, e, c, h := n.root, n.store, n.e, n.c, n.h
	r1 := tune(t, e, c, n.b, "2026-12-01-dddddddddddd")
	r2 := tune(t, e, c, mlpBundleOf(t, 2048), "2026-12-02-dddddddddddd")
	// Night 2 ten times slower still (beyond any noise), and night 1's
	// winner the other candidate, tied with night 2's: the tie of
	// another version excuses no change of winner.
	slowDown(t, store, r2, "tests.MLP")
	cur, prev, err := history.Find(ctx, store, "tests.MLP", r2.Platform, r2.Run)
	if err != nil || prev == nil || prev.Run != r1.Run || cur.BundleDigest == prev.BundleDigest {
		t.Fatalf("night 2's entry %+v compared with %+v (%v): want night 1's, another bundle", cur, prev, err)
	}
	if cur.Graphs[0].Digest == "" || cur.Graphs[0].Digest == prev.Graphs[0].Digest || cur.Graphs[0].Shapes != "input:1x16..8x16" {
		t.Fatalf("graph 0's version: %q %q, before %q", cur.Graphs[0].Digest, cur.Graphs[0].Shapes, prev.Graphs[0].Digest)
	}
	other := map[string]string{"ort:cpu:basic": "ort:cpu:extended", "ort:cpu:extended": "ort:cpu:basic"}[cur.Graphs[0].Candidate]
	prev.Graphs[0].Candidate, prev.Graphs[0].Tied = other, []string{other, cur.Graphs[0].Candidate}
	if err := artifacts.PutJSON(ctx, store, prev.Key(), prev); err != nil {
		t.Fatal(err)
	}
	plan := putPlan(t, store, state.Plan{Nightly: "2026-12-02-dddddddddddd", Notify: h.srv.URL, Entries: []state.PlanEntry{
		{Model: "tests.MLP", Target: "cpu", Run: r2.Run, Outcome: state.OutcomeSubmitted, Graphs: 1, Enqueued: 1},
	}})
	s, sent, err := report.Morning(ctx, store, plan.Nightly, "", report.NotifyOptions{Claim: report.RedisClaimer{RDB: e.Redis}})
	if err != nil || sent != report.NotifySent {
		t.Fatalf("morning report: %s %v, want the new version announced", sent, err)
	}
	tt, en := s.Totals, s.Entries[0]
	if tt.Regressions != 0 || tt.NewVersions != 1 || tt.WinnerChanges != 1 || tt.Faster != 0 || en.Regressions != 0 {
		t.Fatalf("totals %+v: want no regression, one new version, one winner change", tt)
	}
	if want := "bundle " + prev.BundleDigest[:len("sha256:")+12]; !strings.Contains(en.NewVersion, want) || !strings.Contains(en.NewVersion, "graph 0 (files ") {
		t.Errorf("new version %q, want it to name %s and graph 0's files", en.NewVersion, want)
	}
	kinds := map[string]history.Change{}
	for _, ch := range en.Changes {
		kinds[ch.Graph+" "+ch.Kind] = ch
	}
	if v, ok := kinds["0 "+history.ChangeNewVersion]; !ok || v.Was != history.ChangeSlower || v.Regression {
		t.Errorf("graph 0's changes %+v: want a new version that was slower, no regression", en.Changes)
	}
	if _, ok := kinds["0 "+history.ChangeWinner]; !ok {
		t.Errorf("graph 0's changes %+v: want its change of winner", en.Changes)
	}
	readDoc(t, root, report.SummaryKey(plan.Nightly), schemas.Summary)
	page := string(readDoc(t, root, report.ReportKey(plan.Nightly), ""))
	body := h.bodies[0].Text
	for what, text := range map[string]string{"webhook": body, "report.html": page} {
		for _, want := range []string{"new version", "0 regression(s)", "1 winner change(s)", "winner changed"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q:\n%s", what, want, text)
			}
		}
		if strings.Contains(text, "graph 0 slower") || strings.Contains(text, "1 regression") {
			t.Errorf("%s pages the new version as a regression:\n%s", what, text)
		}
	}
	if !strings.Contains(page, `id="new-versions"`) {
		t.Errorf("report.html lists no new versions")
	}
}
