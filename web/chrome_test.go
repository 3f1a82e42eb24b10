package web_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// chromium is Debian's browser; nothing downloads one of its own.
const chromium = "/usr/bin/chromium"

// browser starts a headless Chromium for the test, with the flags
// ../shared/reference/operations.md gives and a fresh profile. Without
// chromium it skips, or fails when CI is set.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that drives Chromium")
	}
	if _, err := os.Stat(chromium); err != nil {
		msg := chromium + " not found: install it with `apt-get install chromium`"
		if testsvc.InCI() {
			t.Fatalf("%s (CI is set, so this fails instead of skipping)", msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chromium, err)
	}
	return bctx
}

// tab is one page load in a new tab, with what went wrong while loading.
type tab struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string // console errors, exceptions, failed requests
}

func (tb *tab) add(format string, args ...any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, fmt.Sprintf(format, args...))
}

// open loads url in a new tab and waits until the page has loaded; it
// records every console error, uncaught exception, request that failed
// and response of status 400 or more.
func open(t *testing.T, bctx context.Context, url string) *tab {
	t.Helper()
	tb := &tab{}
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				tb.add("console error: %s", args(ev.Args))
			}
		case *runtime.EventExceptionThrown:
			tb.add("exception: %s", ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				tb.add("log error: %s (%s)", ev.Entry.Text, ev.Entry.URL)
			}
		case *network.EventLoadingFailed:
			tb.add("request failed: %s", ev.ErrorText)
		case *network.EventResponseReceived:
			if ev.Response.Status >= 400 {
				tb.add("%s: HTTP %d", ev.Response.URL, ev.Response.Status)
			}
		}
	}))
	t.Cleanup(cancel)
	tb.ctx = ctx
	steps := []error{}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	steps = append(steps, err)
	_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	steps = append(steps, err)
	_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	steps = append(steps, err, chromedp.Do(ctx, chromedp.Navigate(url)))
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	return tb
}

func args(as []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
	}
	return strings.Join(parts, " ")
}

// clean fails the test if loading the page went wrong anywhere.
func (tb *tab) clean(t *testing.T, what string) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		t.Errorf("%s: %s", what, p)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// chart is what the page draws in one chart.
type chart struct {
	Kind   string `json:"kind"`
	Series int    `json:"series"`
	Points int    `json:"points"`
	Marks  int    `json:"marks"`
}

// charts counts, in the DOM as rendered, each chart's series and points
// of a kind (lines, hbars, columns).
func (tb *tab) charts(t *testing.T, kind string) []chart {
	t.Helper()
	return eval[[]chart](t, tb, fmt.Sprintf(`Array.from(document.querySelectorAll('svg.chart[data-kind=%q]')).map(s => ({kind: s.dataset.kind,
		series: s.querySelectorAll('g.series').length, points: s.querySelectorAll('.point, .bar').length,
		marks: s.querySelectorAll('.point.mark').length}))`, kind))
}

// links are the absolute URLs of the page's links.
func (tb *tab) links(t *testing.T) []string {
	t.Helper()
	return eval[[]string](t, tb, `Array.from(document.querySelectorAll('a[href]')).map(a => a.href)`)
}

func (tb *tab) count(t *testing.T, selector string) int {
	t.Helper()
	return eval[int](t, tb, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector))
}

func (tb *tab) text(t *testing.T) string {
	t.Helper()
	return eval[string](t, tb, `document.body.innerText`)
}

// screenshot saves the page as a PNG when TUNEFLEET_SCREENSHOTS names a
// directory (how docs/ got its pictures).
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("TUNEFLEET_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(dir+"/"+name+".png", png, 0o644); err != nil {
		t.Fatal(err)
	}
}
