package web_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
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
	t.Run("nightly list", u.nightlyList)
	t.Run("nightly page", u.nightlyPage)
	t.Run("nightly report.html links to the UI", u.nightlyReportLinks)
	t.Run("history of ten runs", u.tenRunHistory)
	t.Run("compare", u.compareRuns)
	t.Run("runs list columns", u.runsColumns)
	t.Run("fleet speedup", u.fleetSpeedup)
	t.Run("monitor", u.monitor)
	t.Run("monitor links back", u.monitorBackLink)
	t.Run("links resolve", u.linksResolve)
	t.Run("no such run", u.noSuchRun)
	t.Run("cancel", func(t *testing.T) { testCancel(t, bctx, f, u.ro, u.rw) })
	// Last: it rewrites a history entry (the second run regresses).
	t.Run("compare one click away", u.compareOneClick)
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
	// Each winner's reason and figure, the one its decision used (the
	// headline of its result.json), as every other view shows it (issue
	// 30: the page and compare showed one measurement as 3.91M and 3.94M).
	text := tb.text(t)
	for _, w := range winners(t, u.f, u.f.first) {
		if !strings.Contains(text, w.reason) || !strings.Contains(text, w.figure) {
			t.Errorf("the page does not show a winner's reason %q and figure %s:\n%s", w.reason, w.figure, text)
		}
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
	// One section: the platform key, the class cpu its label (the class's
	// copy of the history is no second section).
	if n := tb.count(t, "section.platform"); n != 1 {
		t.Errorf("%d platform sections, want 1", n)
	}
	if got := eval[string](t, tb, `document.querySelector('section.platform h2').innerText`); !strings.Contains(got, "class cpu") {
		t.Errorf("section heading %q does not name the class", got)
	}
	got := tb.charts(t, "lines")
	if len(got) != 2 {
		t.Fatalf("%d history charts, want 2 (one per graph): %+v", len(got), got)
	}
	// Graph 0: two runs, the second's winner another (ringed). Graph 1:
	// the second run failed: a cross, not a gap.
	if got[0].Series != 1 || got[0].Points != 2 || got[0].Marks != 1 {
		t.Errorf("graph 0's chart %+v, want 1 series, 2 points, 1 winner change ringed", got[0])
	}
	if n := tb.count(t, "svg.chart .point.failed"); n != 1 {
		t.Errorf("%d failed points drawn, want 1 (graph 1 of the second run)", n)
	}
	if n := tb.count(t, "svg.chart line.xmark.settings"); n != 2 {
		t.Errorf("%d settings-changed marks, want 2 (the second run, on each graph's chart)", n)
	}
	text := tb.text(t)
	if !strings.Contains(text, "settings changed: candidates ort:cpu:basic,ort:cpu:all → ort:cpu:disabled") || strings.Contains(text, "newly failing") {
		t.Errorf("the history does not say the settings changed, or says newly failing:\n%s", text)
	}
	if n := tb.count(t, `a[href="/nightly/`+u.f.night2+`"]`); n != 1 {
		t.Errorf("%d links to nightly %s, want 1", n, u.f.night2)
	}
	tb.screenshot(t, "web-model")
	collect(t, tb, u.links)
}

func (u *ui) fleetPage(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/fleet")
	tb.clean(t, "fleet page")
	// One cell: the platform key's (the class's copy is no column).
	if n := tb.count(t, "td.cell.ok, td.cell.regressed, td.cell.failed"); n != 1 {
		t.Errorf("%d cells, want 1 (one model on its platform key, labelled class cpu)", n)
	}
	if n := tb.count(t, "#fleet th .badge.class"); n != 1 {
		t.Errorf("%d class labels in the header, want 1", n)
	}
	// The newest run failed a graph: the last good run is the first.
	if got := eval[string](t, tb, `document.querySelector('.staleness').dataset.lastGood`); got == "" {
		t.Error("no last good run shown")
	}
	if text := tb.text(t); !strings.Contains(text, "last good run: ") {
		t.Errorf("the fleet page shows no staleness:\n%s", text)
	}
	tb.screenshot(t, "web-fleet")
	collect(t, tb, u.links)
}

func (u *ui) nightlyList(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/nightly")
	tb.clean(t, "/nightly")
	rows := eval[[]string](t, tb, `Array.from(document.querySelectorAll('tr.nightly-row')).map(r => r.dataset.nightly)`)
	if len(rows) != 2 || rows[0] != u.f.night2 || rows[1] != u.f.night1 {
		t.Fatalf("nightly rows %v, want %s then %s (newest first)", rows, u.f.night2, u.f.night1)
	}
	cells := eval[[]string](t, tb, `Array.from(document.querySelectorAll('tr.nightly-row')[0].cells).map(c => c.innerText)`)
	// planned, nightly, fleet, models, done, failed, unchanged, regressions, device time
	if len(cells) != 9 || cells[3] != "2" || cells[4] != "0" || cells[5] != "2" || cells[7] != "0" || !strings.Contains(cells[8], "CPU") {
		t.Errorf("night 2's row %q: want 2 models, 0 done, 2 failed (a graph failed, one not submitted), 0 regressions, CPU time", cells)
	}
	tb.screenshot(t, "web-nightlies")
	collect(t, tb, u.links)
}

func (u *ui) nightlyPage(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/nightly/"+u.f.night2)
	tb.clean(t, "/nightly/"+u.f.night2)
	// Failures first: the entry that was not submitted, then the run
	// whose graph failed (its settings changed).
	order := eval[[]string](t, tb, `Array.from(document.querySelectorAll('tr.entry-row')).map(r => r.dataset.model + " on " + r.dataset.target)`)
	if want := []string{model + " on cpu", "webtest.Gone on cpu", model + " on " + idleQueue}; !slices.Equal(order, want) {
		t.Errorf("entries %v, want %v: the failures first (the plan lists the running one first)", order, want)
	}
	text := tb.text(t)
	if !strings.Contains(text, "settings changed") || strings.Contains(text, "newly failing") {
		t.Errorf("the nightly page does not say settings changed, or says newly failing:\n%s", text)
	}
	if strings.Contains(text, "e+0") {
		t.Errorf("a throughput in e-notation:\n%s", text)
	}
	for _, href := range []string{"/runs/" + u.f.second, "/runs/" + u.f.first, "/models/" + model, "/nightly/" + u.f.night2 + "/report.html"} {
		if n := tb.count(t, `a[href="`+href+`"]`); n == 0 {
			t.Errorf("no link to %s", href)
		}
	}
	// Graph 0 moved with the settings: a relative bar, purple.
	if got := tb.charts(t, "deltas"); len(got) != 1 || got[0].Points != 1 {
		t.Errorf("relative bars %+v, want one chart of graph 0 (graph 1 failed)", got)
	}
	tb.screenshot(t, "web-nightly")
	collect(t, tb, u.links)

	resp, err := http.Get(u.ro + "/nightly/2026-01-01-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a nightly with no plan: HTTP %d, want 404", resp.StatusCode)
	}
}

// nightlyReportLinks: report.html written with --ui-url, opened from
// disk, links into the UI: a click on a run id opens its run page.
func (u *ui) nightlyReportLinks(t *testing.T) {
	ctx := context.Background()
	if _, _, err := report.MorningLinked(ctx, u.f.store, u.f.night2, "", report.NotifyOptions{}, report.UILinks(u.ro)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(u.f.root, filepath.FromSlash(report.ReportKey(u.f.night2)))
	tb := open(t, u.bctx, "file://"+path)
	tb.clean(t, "nightly report.html")
	if n := tb.count(t, "script"); n != 0 {
		t.Errorf("report.html has %d scripts", n)
	}
	sel := `a[href="` + u.ro + "/runs/" + u.f.second + `"]`
	if n := tb.count(t, sel); n == 0 {
		t.Fatalf("report.html has no link to run %s on %s", u.f.second, u.ro)
	}
	if resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("follow the run link: %v, %+v", err, resp)
	}
	if got := eval[string](t, tb, `location.pathname`); got != "/runs/"+u.f.second {
		t.Errorf("the link led to %s", got)
	}
}

// tickBox is one x-axis label's box as the browser laid it out.
type tickBox struct {
	Text  string  `json:"text"`
	X     float64 `json:"x"`
	Width float64 `json:"width"`
}

// tenRunHistory: a model of ten runs has one chart per graph whose date
// labels, as Chromium lays them out (getBBox), never overlap.
func (u *ui) tenRunHistory(t *testing.T) {
	ten := u.f.tenRuns(t, u.f.first)
	tb := open(t, u.bctx, u.ro+"/models/"+url.PathEscape(ten))
	tb.clean(t, "ten-run history")
	charts := eval[[][]tickBox](t, tb, `Array.from(document.querySelectorAll('svg.chart[data-kind=lines]')).map(s =>
		Array.from(s.querySelectorAll('text.xtick')).map(e => { const b = e.getBBox(); return {text: e.textContent, x: b.x, width: b.width}; }))`)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want 2 (one per graph)", len(charts))
	}
	for i, ticks := range charts {
		if len(ticks) < 3 {
			t.Errorf("chart %d has %d date labels, want at least 3 of 10", i, len(ticks))
		}
		if ticks[0].Text != "11-29 02:00" {
			t.Errorf("chart %d: the first label drawn is %q, want the newest run's (11-29 02:00)", i, ticks[0].Text)
		}
		sort.Slice(ticks, func(a, b int) bool { return ticks[a].X < ticks[b].X })
		for j := 1; j < len(ticks); j++ {
			if prev := ticks[j-1]; prev.X+prev.Width > ticks[j].X {
				t.Errorf("chart %d: %q (x %.1f, width %.1f) overlaps %q (x %.1f)", i, prev.Text, prev.X, prev.Width, ticks[j].Text, ticks[j].X)
			}
		}
		t.Logf("chart %d: %d labels, widths %.1f px", i, len(ticks), ticks[0].Width)
	}
	tb.screenshot(t, "web-model-ten-runs")
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
	var out []chart
	for _, gr := range graphResults(t, f, run) {
		g, r := gr.name, gr.result
		c := chart{Kind: "lines"}
		for _, cr := range r.Results {
			if len(cr.Benchmarks) > 0 {
				c.Series++
				c.Points += len(cr.Benchmarks)
			}
		}
		if c.Points < 2*c.Series {
			t.Fatalf("graph %s: %+v: a sweep of one batch size would not show a line", g, c)
		}
		out = append(out, c)
	}
	return out
}

// winner is a graph's winner as its result.json records it: its reason
// and its headline figure in human units.
type winner struct{ reason, figure string }

func winners(t *testing.T, f *fixture, run string) []winner {
	t.Helper()
	var out []winner
	for _, gr := range graphResults(t, f, run) {
		r := gr.result
		if r.Winner == nil {
			continue
		}
		st, ok := strategy.Headline(&r.Winner.Selection, r.Results[r.Winner.Index].Benchmarks)
		if !ok || st.Throughput != r.Winner.Value {
			t.Fatalf("graph %s: headline %+v (ok %v) is not the decision's value %v", gr.name, st, ok, r.Winner.Value)
		}
		out = append(out, winner{r.Winner.Reason, backend.Human(st.Throughput)})
	}
	if len(out) == 0 {
		t.Fatalf("run %s has no winner", run)
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

// graphResult is one graph's result.json as the store holds it.
type graphResult struct {
	name   string
	result *tuner.Result
}

// graphResults reads a run's graphs' results, in the manifest's order.
func graphResults(t *testing.T, f *fixture, run string) []graphResult {
	t.Helper()
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(context.Background(), f.store, artifacts.RunKey(run), &spec); err != nil {
		t.Fatal(err)
	}
	var out []graphResult
	for _, g := range spec.Manifest.Graphs {
		data, err := artifacts.ReadObject(context.Background(), f.store, artifacts.GraphResultKey(run, g.Name), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		r, err := runreport.DecodeResult(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, graphResult{g.Name, r})
	}
	return out
}
