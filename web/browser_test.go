package web_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/web"
)

// TestWebUIInABrowser drives headless Chromium through every page of
// `producer serve`'s handler, on loopback, over a store and a Redis with
// real runs tuned by real ONNX Runtime.
func TestWebUIInABrowser(t *testing.T) {
	bctx := browser(t)
	f := newFixture(t)
	u := &ui{bctx: bctx, f: f, ro: f.serve(t, web.Config{PageSize: 2}).URL, rw: f.serve(t, web.Config{Write: true}).URL, links: map[string]bool{}}
	t.Run("runs list", u.runsList)
	t.Run("run page", u.runPage)
	t.Run("malformed result", u.malformedResult)
	t.Run("report.html from disk", u.reportFromDisk)
	t.Run("model page", u.modelPage)
	t.Run("fleet page", u.fleetPage)
	t.Run("compare", u.compareRuns)
	t.Run("runs list columns", u.runsColumns)
	t.Run("fleet speedup", u.fleetSpeedup)
	t.Run("monitor", u.monitor)
	t.Run("monitor links back", u.monitorBackLink)
	t.Run("links resolve", u.linksResolve)
	t.Run("no such run", u.noSuchRun)
	t.Run("cancel", func(t *testing.T) { testCancel(t, bctx, f, u.ro, u.rw) })
}

// ui is the browser test's fleet: a read-only server (pages of two runs)
// and one with --write, and the links its pages showed.
type ui struct {
	bctx   context.Context
	f      *fixture
	ro, rw string
	links  map[string]bool
}

func (u *ui) runsList(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/")
	tb.clean(t, "/")
	if n := tb.count(t, "tr.run-row"); n != 2 {
		t.Errorf("first page lists %d runs, want 2 (its page size)", n)
	}
	tb.screenshot(t, "web-runs")
	collect(t, tb, u.links)
	// The older page holds the third run.
	// RunResponse waits for the page the click navigates to.
	if resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS("#older"))); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("follow older runs: %v, %+v", err, resp)
	}
	if n := tb.count(t, "tr.run-row"); n != 1 {
		t.Errorf("the older page lists %d runs, want 1", n)
	}
	for query, want := range map[string]int{
		"?status=done&model=" + model: 2, "?status=running": 1, "?target=" + idleQueue: 1, "?model=nosuch": 0,
	} {
		tb := open(t, u.bctx, u.ro+"/"+query)
		tb.clean(t, query)
		if n := tb.count(t, "tr.run-row"); n != want {
			t.Errorf("%s lists %d runs, want %d", query, n, want)
		}
	}
}

func (u *ui) runPage(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/runs/"+u.f.first)
	tb.clean(t, "run page")
	want := wantCharts(t, u.f, u.f.first)
	got := tb.charts(t, "lines")
	if !equalCharts(got, want) {
		t.Errorf("run page draws %+v, want %+v (from the run's result.json files)", got, want)
	}
	for _, c := range got {
		if c.Series != 2 {
			t.Errorf("a chart has %d series, want 2: ort:cpu:basic and ort:cpu:all were both measured", c.Series)
		}
	}
	if n := tb.count(t, "tr.candidate"); n != 4 {
		t.Errorf("%d candidate rows, want 4 (2 graphs × 2 candidates)", n)
	}
	if n := tb.count(t, "a.log"); n == 0 {
		t.Error("no link to a log")
	}
	if n := tb.count(t, "a.engine"); n != 2 {
		t.Errorf("%d engine u.links, want 2 (one winner per graph)", n)
	}
	if text := tb.text(t); !strings.Contains(text, "highest throughput") {
		t.Errorf("the page does not say why the winner won:\n%s", text)
	}
	tb.screenshot(t, "web-run")
	collect(t, tb, u.links)
}

func (u *ui) malformedResult(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/runs/"+u.f.second)
	tb.clean(t, "run page with a broken result.json")
	if n := tb.count(t, ".graph.unreadable-result"); n != 1 {
		t.Errorf("%d graphs shown unreadable, want 1", n)
	}
	if text := tb.text(t); !strings.Contains(text, "result.json is unreadable") || !strings.Contains(text, "malformed JSON") {
		t.Errorf("the page does not say why graph 1 is unreadable:\n%s", text)
	}
	// Graph 0 renders whole: one candidate, one series.
	if got := tb.charts(t, "lines"); len(got) != 1 || got[0].Series != 1 {
		t.Errorf("charts %+v, want graph 0's alone with one series", got)
	}
}

func (u *ui) reportFromDisk(t *testing.T) {
	path := filepath.Join(u.f.root, filepath.FromSlash(artifacts.RunReportKey(u.f.first)))
	tb := open(t, u.bctx, "file://"+path)
	tb.clean(t, "report.html")
	want := open(t, u.bctx, u.ro+"/runs/"+u.f.first)
	for _, kind := range []string{"lines", "hbars"} {
		if got, w := tb.charts(t, kind), want.charts(t, kind); !equalCharts(got, w) || len(w) == 0 {
			t.Errorf("report.html draws %s charts %+v, the run page %+v", kind, got, w)
		}
	}
	if n := tb.count(t, "script"); n != 0 {
		t.Errorf("report.html has %d scripts", n)
	}
}

func (u *ui) modelPage(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/models/"+url.PathEscape(model))
	tb.clean(t, "model page")
	got := tb.charts(t, "lines")
	// The target class and the platform key each keep the history.
	if len(got) != 2 {
		t.Fatalf("%d history charts, want 2 (cpu and its platform key): %+v", len(got), got)
	}
	for _, c := range got {
		// 2 graphs × 2 runs; the second run's winner differs on both.
		if c.Series != 2 || c.Points != 4 || c.Marks != 2 {
			t.Errorf("history chart %+v, want 2 series, 4 points, 2 winner changes marked", c)
		}
	}
	tb.screenshot(t, "web-model")
	collect(t, tb, u.links)
}

func (u *ui) fleetPage(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/fleet")
	tb.clean(t, "fleet page")
	if n := tb.count(t, "td.cell.ok, td.cell.regressed, td.cell.failed"); n != 2 {
		t.Errorf("%d cells, want 2 (one model × cpu and its platform key)", n)
	}
	tb.screenshot(t, "web-fleet")
	collect(t, tb, u.links)
}

func (u *ui) monitor(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/monitor/")
	if err := chromedp.Do(tb.ctx, chromedp.WaitVisible(chromedp.CSS("#root"))); err != nil {
		t.Fatal(err)
	}
	tb.clean(t, "asynqmon")
}

func (u *ui) linksResolve(t *testing.T) {
	if len(u.links) < 10 {
		t.Fatalf("only %d links collected", len(u.links))
	}
	for link := range u.links {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: HTTP %d", link, resp.StatusCode)
		}
	}
}

func (u *ui) noSuchRun(t *testing.T) {
	resp, err := http.Get(u.ro + "/runs/nosuch-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HTTP %d, want 404", resp.StatusCode)
	}
	tb := open(t, u.bctx, u.ro+"/runs/nosuch-000000000000")
	if text := tb.text(t); !strings.Contains(text, "404") || !strings.Contains(text, "no run nosuch-000000000000") {
		t.Errorf("404 page says:\n%s", text)
	}
}

// testCancel: read-only, the button is absent and a POST is refused; with
// --write the button cancels the run, which finalizes as cancelled.
func testCancel(t *testing.T, bctx context.Context, f *fixture, roURL, rwURL string) {
	page := "/runs/" + f.running
	tb := open(t, bctx, roURL+page)
	tb.clean(t, "read-only run page")
	if n := tb.count(t, "#cancel"); n != 0 {
		t.Errorf("a read-only server shows %d cancel buttons", n)
	}
	if code := post(t, roURL, page+"/cancel", roURL, "x"); code != http.StatusForbidden {
		t.Errorf("POST to a read-only server: HTTP %d, want 403", code)
	}
	if code := post(t, rwURL, page+"/cancel", "http://evil.example", "x"); code != http.StatusForbidden {
		t.Errorf("cross-origin POST: HTTP %d, want 403", code)
	}
	if code := post(t, rwURL, page+"/cancel", rwURL, "not-the-token"); code != http.StatusForbidden {
		t.Errorf("POST without the page's token: HTTP %d, want 403", code)
	}
	if st, _ := f.client.Runs().Get(context.Background(), f.running); !st.CancelRequested.IsZero() {
		t.Fatal("a refused POST cancelled the run")
	}
	tb = open(t, bctx, rwURL+page)
	tb.clean(t, "run page with --write")
	if err := chromedp.Do(tb.ctx, chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("#cancel-notice"))); err != nil {
		t.Fatal(err)
	}
	tb.clean(t, "after cancel")
	st, err := f.client.Runs().Get(context.Background(), f.running)
	if err != nil {
		t.Fatal(err)
	}
	if st.CancelRequested.IsZero() || st.Cancelled != 2 {
		t.Fatalf("after the click: %+v, want cancel requested and 2 graphs cancelled", st)
	}
	// Its finalize waits on its queue: a worker for it ends the run.
	f.startWorker(t, idleQueue)
	f.wait(t, f.running, runstate.RunCancelled)
	tb = open(t, bctx, rwURL+page)
	if got := eval[string](t, tb, `document.querySelector('#run-status').textContent`); got != runstate.RunCancelled {
		t.Errorf("run page status %q, want cancelled", got)
	}
	if n := tb.count(t, "#cancel"); n != 0 {
		t.Errorf("a cancelled run still shows %d cancel buttons", n)
	}
}

func post(t *testing.T, base, path, origin, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// collect adds the page's links on the server to links.
func collect(t *testing.T, tb *tab, links map[string]bool) {
	t.Helper()
	for _, l := range tb.links(t) {
		if strings.HasPrefix(l, "http://127.0.0.1") {
			links[strings.SplitN(l, "#", 2)[0]] = true
		}
	}
}

// wantCharts are the throughput-vs-batch charts a run's results call for,
// counted from its result.json files as the store holds them: a series per
// candidate measured, a point per batch size it was measured at.
func wantCharts(t *testing.T, f *fixture, run string) []chart {
	t.Helper()
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(context.Background(), f.store, artifacts.RunKey(run), &spec); err != nil {
		t.Fatal(err)
	}
	var out []chart
	for _, g := range spec.Manifest.Graphs {
		data, err := artifacts.ReadObject(context.Background(), f.store, artifacts.GraphResultKey(run, g.Name), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		r, err := runreport.DecodeResult(data)
		if err != nil {
			t.Fatal(err)
		}
		c := chart{Kind: "lines"}
		for _, cr := range r.Results {
			if len(cr.Benchmarks) > 0 {
				c.Series++
				c.Points += len(cr.Benchmarks)
			}
		}
		if c.Points < 2*c.Series {
			t.Fatalf("graph %s: %+v: a sweep of one batch size would not show a line", g.Name, c)
		}
		out = append(out, c)
	}
	return out
}

func equalCharts(a, b []chart) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
