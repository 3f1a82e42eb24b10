package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"
)

// compareOneClick: every page that shows a run reaches its comparison in
// one click. The runs list links each run's nightly; a nightly run's page
// names and links its nightly, the comparison with the previous run of
// its model on its platform and, once it regressed, its nightly's entry;
// the model page links the last two runs' comparison and each run's with
// the one before; the nightly page links each entry's two runs; the
// compare form offers the recent runs of the model (a datalist: any id
// may still be typed).
func (u *ui) compareOneClick(t *testing.T) {
	f := u.f
	want := "/compare?a=" + f.first + "&b=" + f.second
	href := func(tb *tab, sel string) string {
		t.Helper()
		return eval[string](t, tb, `(e => e ? e.getAttribute("href") : "")(document.querySelector(`+jsString(sel)+`))`)
	}
	tb := open(t, u.bctx, u.ro+"/?model="+model)
	tb.clean(t, "runs list")
	if h := href(tb, `tr.run-row[data-run="`+f.second+`"] td.nightly a`); h != "/nightly/"+f.night2 {
		t.Errorf("the runs list's nightly of %s links %q, want /nightly/%s", f.second, h, f.night2)
	}
	first := open(t, u.bctx, u.ro+"/runs/"+f.first)
	first.clean(t, "the first run's page")
	if h := href(first, "#run-nightly"); h != "/nightly/"+f.night1 {
		t.Errorf("the first run's page links its nightly as %q, want /nightly/%s", h, f.night1)
	}
	if n := first.count(t, "#compare-previous"); n != 0 {
		t.Errorf("the first run of its history links a comparison with a previous run")
	}
	// The second run regresses (graph 1 newly failing) once its history
	// entry carries the first's settings: the same work, a worse result.
	ctx := context.Background()
	st, err := f.client.Runs().Get(ctx, f.second)
	if err != nil {
		t.Fatal(err)
	}
	cur, prev, err := history.Find(ctx, f.store, model, st.Platform, f.second)
	if err != nil || prev == nil || prev.Run != f.first {
		t.Fatalf("the second run's history: %v, previous %+v", err, prev)
	}
	cur.Settings = prev.Settings
	if err := artifacts.PutJSON(ctx, f.store, cur.Key(), cur); err != nil {
		t.Fatal(err)
	}
	second := open(t, u.bctx, u.ro+"/runs/"+f.second)
	second.clean(t, "the second run's page")
	anchor := report.EntryAnchor(model, "cpu")
	if h := href(second, "#run-nightly"); h != "/nightly/"+f.night2 {
		t.Errorf("the second run's page links its nightly as %q, want /nightly/%s", h, f.night2)
	}
	if h := href(second, "#run-regression"); h != "/nightly/"+f.night2+"#"+anchor {
		t.Errorf("the regressed run's page links its regression as %q, want /nightly/%s#%s", h, f.night2, anchor)
	}
	if h := href(second, "#compare-previous"); h != want {
		t.Fatalf("the second run's page: compare with previous links %q, want %q", h, want)
	}
	second.screenshot(t, "web-run-related")
	// One click: the comparison of the two runs, its form offering the
	// model's recent runs.
	if resp, err := chromedp.RunResponse(second.ctx, chromedp.Click(chromedp.CSS("#compare-previous"))); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("follow compare with previous: %v, %+v", err, resp)
	}
	if n := second.count(t, "tr.compare-row"); n != 2 {
		t.Errorf("the comparison shows %d graph rows, want 2", n)
	}
	offered := func(tb *tab) []string {
		return eval[[]string](t, tb, `[...document.querySelectorAll("#compare-runs option")].map(o => o.value)`)
	}
	if got := offered(second); !contains(got, f.first) || !contains(got, f.second) || len(got) != 3 {
		t.Errorf("the compare form offers %v, want the model's three runs", got)
	}
	form := open(t, u.bctx, u.ro+"/compare")
	form.clean(t, "compare form")
	if got := offered(form); !contains(got, f.first) || !contains(got, f.second) || !contains(got, f.running) {
		t.Errorf("the empty compare form offers %v, want the recent runs", got)
	}
	if l := eval[string](t, form, `document.querySelector("#compare-a").getAttribute("list")`); l != "compare-runs" {
		t.Errorf("input A's list is %q: want the runs offered, free text still possible", l)
	}
	// The model page: the last two runs, and each run with the one before.
	mp := open(t, u.bctx, u.ro+"/models/"+model)
	mp.clean(t, "model page")
	if h := href(mp, "a.compare-last-two"); h != want {
		t.Errorf("the model page's last two runs link %q, want %q", h, want)
	}
	if h := href(mp, "a.compare-previous"); h != want {
		t.Errorf("the model page's newest row compares %q, want %q", h, want)
	}
	// The nightly page: its entry links the two runs' comparison, and has
	// the anchor the run page's regression link names.
	np := open(t, u.bctx, u.ro+"/nightly/"+f.night2)
	np.clean(t, "nightly page")
	if h := href(np, `[id="`+anchor+`"] a.compare-previous`); h != want {
		t.Errorf("the nightly's entry links %q, want %q", h, want)
	}
	if h := href(np, `#entries tr.entry-row[data-target="cpu"] a.compare`); h != want {
		t.Errorf("the nightly's table links %q, want %q", h, want)
	}
	if n := np.count(t, `[id="`+anchor+`"] .badge.reg`); n != 1 {
		t.Errorf("the nightly's entry for the run shows no regression")
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
