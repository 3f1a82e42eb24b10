package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// RenderHTML writes the report page: one self-contained HTML file, its
// charts inline SVG drawn here, no script, no stylesheet or font fetched.
func RenderHTML(w io.Writer, s *Summary) error {
	return page.Execute(w, s)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"statusChart":  statusChart,
	"secondsChart": secondsChart,
	"graphChart":   graphChart,
	"fmtBench":     fmtBench,
	"kind":         func(k string) string { return strings.ReplaceAll(k, "_", " ") },
	"dur":          dur,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunefleet nightly {{.Nightly}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #dde}
.meta{color:#667;font-size:.9em} .charts{display:flex;gap:2em;flex-wrap:wrap}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.5em 0} th,td{text-align:left;padding:.3em .5em;border-bottom:1px solid #eef} th{background:#f5f6fa}
.done{color:#17803d} .failed,.not_submitted,.reg{color:#b42318;font-weight:600} .pending{color:#a15c00} .num{text-align:right;font-variant-numeric:tabular-nums}
.entry{margin:1.5em 0;padding:.8em 1em;border:1px solid #e3e5ee;border-radius:6px} .entry h3{margin:.1em 0 .4em;font-size:1.05em}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.8em;background:#eef;margin-left:.4em}
.badge.reg{background:#fde8e7} ul.changes{margin:.3em 0;padding-left:1.2em}
</style></head><body>
<h1>Nightly {{.Nightly}}</h1>
<div class="meta">fleet {{.FleetDigest}} · planned {{.PlanCreatedAt.Format "2006-01-02 15:04:05 MST"}} · report generated {{.GeneratedAt.Format "2006-01-02 15:04:05 MST"}}</div>
{{with .Totals}}
<p><b>{{.Entries}}</b> model × target: <span class="done">{{.Done}} done</span>, <span class="failed">{{.Failed}} failed</span>, <span class="pending">{{.Pending}} pending</span>, {{.Unchanged}} unchanged.
<span class="{{if .Regressions}}reg{{end}}">{{.Regressions}} regression(s)</span>, {{.Faster}} faster, {{.WinnerChanges}} winner change(s), {{.NewlyFailing}} newly failing, {{.Recovered}} recovered.</p>
{{end}}
{{with .Finish}}<p class="finish">{{.Line}}</p>{{end}}
<div class="charts">{{statusChart .Totals}}{{secondsChart .Totals}}</div>
<h2>Models</h2>
<table><tr><th>model</th><th>target</th><th>outcome</th><th>status</th><th class="num">regressions</th><th class="num">spent</th><th class="num">saved</th><th>run</th><th>previous</th></tr>
{{range .Entries}}<tr><td>{{.Model}}</td><td>{{.Target}}</td><td>{{.Outcome}}</td><td class="{{.Status}}">{{.Status}}</td><td class="num{{if .Regressions}} reg{{end}}">{{.Regressions}}</td><td class="num">{{dur .SpentSeconds}}</td><td class="num">{{dur .SavedSeconds}}</td><td>{{.Run}}</td><td>{{.PreviousRun}}</td></tr>
{{end}}</table>
{{range .Entries}}<div class="entry"><h3>{{.Model}} on {{.Target}}<span class="badge {{.Status}}">{{.Status}}</span>{{if .Regressions}}<span class="badge reg">{{.Regressions}} regression(s)</span>{{end}}</h3>
<div class="meta">{{if .Platform}}platform {{.Platform}} · {{end}}{{if .Run}}run {{.Run}}{{end}}{{if .PreviousRun}} · compared with {{.PreviousRun}}{{else if .Run}} · first entry of its history{{end}}</div>
{{if .Error}}<p class="failed">{{.Error}}</p>{{end}}
{{range .Reasons}}<p class="failed">{{.}}</p>{{end}}
{{if .Changes}}<ul class="changes">{{range .Changes}}<li class="{{if .Regression}}reg{{end}}">{{if .Graph}}graph {{.Graph}}: {{end}}{{kind .Kind}}: {{.Detail}}</li>{{end}}</ul>{{end}}
{{if .Graphs}}{{graphChart .}}
<table><tr><th>graph</th><th>status</th><th>winner</th><th>reused</th><th>tonight</th><th>before</th></tr>
{{range .Graphs}}<tr><td>{{.Name}}</td><td class="{{.Status}}">{{.Status}}</td><td>{{.Candidate}}{{if and .PreviousCandidate (ne .PreviousCandidate .Candidate)}} (was {{.PreviousCandidate}}){{end}}</td><td>{{if .Reused}}yes{{end}}</td><td>{{fmtBench .Bench}}</td><td>{{fmtBench .PreviousBench}}</td></tr>
{{end}}</table>{{end}}
</div>
{{end}}
</body></html>
`))

func fmtBench(b *history.Bench) string {
	if b == nil {
		return "—"
	}
	return fmt.Sprintf("%.4g/s · p50 %.3g ms · p90 %.3g ms · cv %.3f · batch %d", b.Throughput, b.P50Ms, b.P90Ms, b.CV, b.BatchSize)
}

// dur formats device seconds: seconds under a minute, else minutes.
func dur(secs float64) string {
	if secs < 60 {
		return fmt.Sprintf("%.1f s", secs)
	}
	return fmt.Sprintf("%.1f min", secs/60)
}

func trimNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func statusChart(t Totals) template.HTML {
	return svgchart.HBars("Model × target", []svgchart.Bar{
		{Label: "done", Value: float64(t.Done), Fill: "#2f9e5a"},
		{Label: "failed", Value: float64(t.Failed), Fill: "#d9443a"},
		{Label: "pending", Value: float64(t.Pending), Fill: "#e0a030"},
		{Label: "unchanged", Value: float64(t.Unchanged), Fill: "#8a94a8"},
		{Label: "regressions", Value: float64(t.Regressions), Fill: "#b42318"},
	}, trimNum)
}

func secondsChart(t Totals) template.HTML {
	return svgchart.HBars("Device time: spent vs saved by reuse", []svgchart.Bar{
		{Label: "GPU spent", Value: t.GPUSecondsSpent, Fill: "#3567c8"},
		{Label: "GPU saved", Value: t.GPUSecondsSaved, Fill: "#9db7ea"},
		{Label: "CPU spent", Value: t.CPUSecondsSpent, Fill: "#6b4fbb"},
		{Label: "CPU saved", Value: t.CPUSecondsSaved, Fill: "#c3b5ea"},
	}, dur)
}

// graphChart draws each graph's throughput tonight next to the previous
// entry's: grey before, blue tonight (red when slower beyond noise, green
// when faster).
func graphChart(e Entry) template.HTML {
	moved := map[string]string{}
	for _, c := range e.Changes {
		if c.Kind == history.ChangeSlower || c.Kind == history.ChangeFaster {
			moved[c.Graph] = c.Kind
		}
	}
	groups := make([]svgchart.Group, 0, len(e.Graphs))
	for _, g := range e.Graphs {
		color := "#3567c8"
		switch moved[g.Name] {
		case history.ChangeSlower:
			color = "#d9443a"
		case history.ChangeFaster:
			color = "#2f9e5a"
		}
		gr := svgchart.Group{Label: "graph " + g.Name, Bars: make([]svgchart.Bar, 2)}
		for j, bn := range []*history.Bench{g.PreviousBench, g.Bench} {
			if bn == nil {
				continue
			}
			fill := "#b8bfcc"
			if j == 1 {
				fill = color
			}
			gr.Bars[j] = svgchart.Bar{Value: bn.Throughput, Fill: fill, Title: fmtBench(bn)}
		}
		groups = append(groups, gr)
	}
	return svgchart.Columns("throughput per graph (samples/s)", groups, []svgchart.Key{
		{Fill: "#b8bfcc", Label: "before"}, {Fill: "#3567c8", Label: "tonight"},
		{Fill: "#d9443a", Label: "slower (beyond noise)"}, {Fill: "#2f9e5a", Label: "faster"},
	})
}
