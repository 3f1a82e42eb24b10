package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// compareRuns: /compare puts the fixture's two done runs side by side;
// graph 1 of the second is unreadable and is said to be, the rest is
// compared; a run the store does not have is a 404.
func (u *ui) compareRuns(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/compare")
	tb.clean(t, "compare form")
	if n := tb.count(t, "#compare-a"); n != 1 {
		t.Fatal("no form to name the runs")
	}
	q := "/compare?a=" + u.f.first + "&b=" + u.f.second
	tb = open(t, u.bctx, u.ro+q)
	tb.clean(t, q)
	if n := tb.count(t, "tr.compare-row"); n != 2 {
		t.Fatalf("%d graph rows, want 2", n)
	}
	rows := eval[[]map[string]string](t, tb, `Array.from(document.querySelectorAll('tr.compare-row')).map(r => ({graph: r.dataset.graph,
		verdict: r.dataset.verdict, ratio: r.querySelector('.ratio').innerText, text: r.innerText}))`)
	for _, r := range rows {
		t.Logf("graph %s: %s, B/A %s", r["graph"], r["verdict"], r["ratio"])
	}
	if r := rows[0]; r["graph"] != "0" || r["verdict"] == "missing" || !strings.Contains(r["ratio"], "×") ||
		!strings.Contains(r["text"], "ort:cpu:disabled") || !strings.Contains(r["text"], "rounds") {
		t.Errorf("graph 0 row %+v: want a ratio with its interval, B's winner ort:cpu:disabled and each side's rounds", r)
	}
	if r := rows[1]; r["graph"] != "1" || r["verdict"] != "missing" || !strings.Contains(r["text"], "unreadable") {
		t.Errorf("graph 1 row %+v: want not comparable, B's result unreadable", r)
	}
	if text := tb.text(t); !strings.Contains(text, "graph(s) moved beyond noise") {
		t.Errorf("no summary line:\n%s", text)
	}
	tb.screenshot(t, "web-compare")
	collect(t, tb, u.links)
	resp, err := http.Get(u.ro + "/compare?a=" + u.f.first + "&b=nosuch-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("compare with a run the store lacks: HTTP %d, want 404", resp.StatusCode)
	}
}

// runsColumns: the runs list says each done run's winners, its speedup
// over the baseline, how long it took, and finds models by part of their
// name.
func (u *ui) runsColumns(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/?status=done&model=TwoGr")
	tb.clean(t, "runs list by a part of the model's name")
	rows := eval[[]map[string]string](t, tb, `Array.from(document.querySelectorAll('tr.run-row')).map(r => ({run: r.dataset.run,
		winners: r.querySelector('.winners').innerText, speedup: r.querySelector('.speedup').innerText,
		took: r.querySelector('.duration').innerText, bar: r.querySelector('.progress .ok').style.width}))`)
	if len(rows) != 2 {
		t.Fatalf("?model=TwoGr lists %d done runs, want 2", len(rows))
	}
	for _, r := range rows {
		t.Logf("run %s: winners %q, speedup %q, took %q", r["run"], r["winners"], r["speedup"], r["took"])
		if r["winners"] == "" || !strings.HasSuffix(r["speedup"], "×") || r["took"] == "" || r["took"] == "0s" || r["bar"] != "100%" {
			t.Errorf("run %s row %+v: want winners, a speedup, a duration and a full green bar", r["run"], r)
		}
	}
	if rows[0]["run"] != u.f.second || rows[0]["winners"] != "ort:cpu:disabled ×2" || rows[0]["speedup"] != "1.00×" {
		t.Errorf("newest row %+v: want %s, won by its one candidate, ort:cpu:disabled, twice: a speedup of exactly 1 over itself", rows[0], u.f.second)
	}
	for query, want := range map[string]int{"?status=done&model=^webtest": 2, "?status=done&model=^TwoGraphs": 0, "?status=done&model=" + model: 2} {
		tb := open(t, u.bctx, u.ro+"/"+query)
		if n := tb.count(t, "tr.run-row"); n != want {
			t.Errorf("%s lists %d runs, want %d", query, n, want)
		}
	}
}

// fleetSpeedup: each fleet cell says its model's speedup over the
// baseline (the geometric mean over graphs), from the history entries.
func (u *ui) fleetSpeedup(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/fleet")
	tb.clean(t, "fleet")
	got := eval[[]string](t, tb, `Array.from(document.querySelectorAll('#fleet .speedup')).map(s => s.innerText)`)
	if len(got) == 0 {
		t.Fatal("no fleet cell shows a speedup")
	}
	for _, s := range got {
		if !strings.HasSuffix(s, "× over baseline") {
			t.Errorf("fleet speedup %q", s)
		}
	}
	t.Logf("fleet speedups: %v", got)
}

// monitorBackLink: asynqmon's page carries a link back to the UI, and
// the queue series the dashboard's $queue variable reads name the queue
// no worker serves.
func (u *ui) monitorBackLink(t *testing.T) {
	tb := open(t, u.bctx, u.ro+"/monitor/")
	if err := chromedp.Do(tb.ctx, chromedp.WaitVisible(chromedp.CSS("#tunefleet-back"))); err != nil {
		t.Fatalf("no link back on /monitor/: %v", err)
	}
	if resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS("#tunefleet-back"))); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("follow the link back: %v, %+v", err, resp)
	}
	if n := tb.count(t, "table#runs"); n != 1 {
		t.Errorf("the link back does not lead to the runs list")
	}
	code, body := get(t, u.ro+"/metrics", nil)
	if code != http.StatusOK || !strings.Contains(body, `tunefleet_queue_tasks{queue="`+idleQueue+`"`) {
		t.Errorf("/metrics (HTTP %d) has no tunefleet_queue_tasks series for the unserved queue %s", code, idleQueue)
	}
}
