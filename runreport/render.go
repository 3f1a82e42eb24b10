package runreport

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// CSS styles Body; Page inlines it, and `producer serve` serves it.
//
//go:embed report.css
var CSS string

//go:embed body.html
var bodyHTML string

var body = template.Must(template.New("body").Funcs(template.FuncMap{
	"summaryChart": summaryChart,
	"interval":     func(st backend.Stats) string { return intervalText(st) },
	"advice":       backend.Advice,
	"ms":           ms,
	"num":          svgchart.Num,
	"when":         when,
	"join":         strings.Join,
	"firstLine":    firstLine,
	"status":       func(s backend.Status) string { return string(s) },
	"bytes":        humanBytes,
	"dur":          func(d time.Duration) string { return d.Round(time.Millisecond).String() },
}).Parse(bodyHTML))

// pageHead and pageTail wrap Body in report.html: the body is rendered
// between them straight into the writer, not into a string first (a run of
// 10,000 graphs has a report of tens of megabytes, held once, not thrice).
var pageHead = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunefleet run {{.Run}}</title>
<style>{{.CSS}}</style></head><body>
`))

const pageTail = `
<footer class="meta">report.html written by tunefleet finalize; charts are inline SVG, nothing is fetched.</footer>
</body></html>
`

// Body renders the run's section (no <html> around it) with links made by l.
func Body(r *Report, l Links) (template.HTML, error) {
	var b bytes.Buffer
	if err := body.Execute(&b, newView(r, l)); err != nil {
		return "", fmt.Errorf("render run %s: %w", r.Run, err)
	}
	return template.HTML(b.String()), nil
}

// Page writes report.html: Body without links, inside a page that inlines
// its CSS and fetches nothing.
func Page(w io.Writer, r *Report) error {
	if err := writePageHead(w, r); err != nil {
		return err
	}
	if err := body.Execute(w, newView(r, Links{})); err != nil {
		return fmt.Errorf("render run %s: %w", r.Run, err)
	}
	_, err := io.WriteString(w, pageTail)
	return err
}

// writePageHead writes report.html up to its body.
func writePageHead(w io.Writer, r *Report) error {
	return pageHead.Execute(w, struct {
		Run string
		CSS template.CSS
	}{r.Run, template.CSS(CSS)})
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return human.Time(t)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
