package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/url"
	"strings"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// Links make a report's run ids, models and nightly ids links into the web
// UI (`producer serve`). The zero Links links nothing: a report.html
// written without --ui-url is read from disk, where no page of the UI is.
type Links struct {
	// Base is the UI's URL ("http://tunefleet.example:8080"); "" with
	// Served: root-relative links, for pages the UI serves itself.
	Base   string
	Served bool
}

// UILinks links into the UI at base ("" links nothing).
func UILinks(base string) Links { return Links{Base: strings.TrimRight(base, "/")} }

func (l Links) on() bool { return l.Served || l.Base != "" }

// Run is a run page's URL ("" when l links nothing).
func (l Links) Run(id string) string {
	if !l.on() || id == "" {
		return ""
	}
	return l.Base + "/runs/" + url.PathEscape(id)
}

// Model is a model page's URL.
func (l Links) Model(m string) string {
	if !l.on() {
		return ""
	}
	return l.Base + "/models/" + url.PathEscape(m)
}

// Nightly is a nightly page's URL.
func (l Links) Nightly(id string) string {
	if !l.on() {
		return ""
	}
	return l.Base + "/nightly/" + url.PathEscape(id)
}

// Compare is the UI's comparison of run a (before) with run b ("" when l
// links nothing or either run is missing).
func (l Links) Compare(a, b string) string {
	if !l.on() || a == "" || b == "" {
		return ""
	}
	return l.Base + "/compare?" + url.Values{"a": {a}, "b": {b}}.Encode()
}

// EntryAnchor is the id of a model × target's section of the report: a
// run page links its regression there (/nightly/<id>#<anchor>).
func EntryAnchor(model, target string) string { return "entry-" + model + "-" + target }

// RenderHTML writes the report page: one self-contained HTML file, its
// charts inline SVG drawn here, no script, no stylesheet or font fetched;
// its links go where l says (the zero Links: none).
func RenderHTML(w io.Writer, s *Summary, l Links) error {
	b, err := Body(s, l)
	if err != nil {
		return err
	}
	return page.Execute(w, struct {
		Nightly string
		CSS     template.CSS
		Body    template.HTML
	}{s.Nightly, template.CSS(CSS), b})
}

// Body is the report without the page around it: what the UI's
// /nightly/<id> shows inside its own layout (with CSS served beside it).
func Body(s *Summary, l Links) (template.HTML, error) {
	var b bytes.Buffer
	// Sized once for what it will hold (a graph's row is about 600
	// bytes): a night of 10,000 graphs is megabytes, and growing the
	// buffer by doubling cost as much as rendering it.
	b.Grow(bodyBase + bodyPerGraph*s.shownGraphs())
	if err := body.Execute(&b, struct {
		*Summary
		L Links
	}{s, l}); err != nil {
		return "", fmt.Errorf("render the report of nightly %s: %w", s.Nightly, err)
	}
	return template.HTML(b.String()), nil
}

// What Body expects to write: bodyBase bytes and bodyPerGraph a graph
// whose row it shows.
const (
	bodyBase     = 16 << 10
	bodyPerGraph = 640
)

// quietLine is what an entry with nothing to say (Entry.quiet) shows
// instead of its graphs' table.
func quietLine(e Entry) string {
	n := fmt.Sprintf("%d graphs", len(e.Graphs))
	if len(e.Graphs) == 1 {
		n = "1 graph"
	}
	switch {
	case e.Carried:
		return n + ", carried forward: nothing ran tonight, nothing to compare"
	case e.PreviousRun != "":
		return n + " done, measured stable, none changed beyond noise since " + e.PreviousRun
	}
	return n + " done, measured stable: the first entry of its history"
}

// CSS styles Body.
const CSS = `.nightly .meta{color:#667;font-size:.9em} .nightly .charts{display:flex;gap:2em;flex-wrap:wrap}
.nightly table{border-collapse:collapse;width:100%;font-size:.9em;margin:.5em 0} .nightly th,.nightly td{text-align:left;padding:.3em .5em;border-bottom:1px solid #eef} .nightly th{background:#f5f6fa}
.nightly .done{color:#17803d} .nightly .failed,.nightly .not_submitted,.nightly .cancelled,.nightly .reg{color:#b42318;font-weight:600} .nightly .pending{color:#a15c00} .nightly .settings{color:#6b4fbb;font-weight:600} .nightly .version{color:#3567c8;font-weight:600} .nightly .num{text-align:right;font-variant-numeric:tabular-nums}
.nightly .entry{margin:1.5em 0;padding:.8em 1em;border:1px solid #e3e5ee;border-radius:6px} .nightly .entry h3{margin:.1em 0 .4em;font-size:1.05em}
.nightly .entry.bad{border-color:#f3b5b0;background:#fffafa}
.nightly .badge{display:inline-block;padding:0 .5em;border-radius:1em;font-size:.8em;background:#eef;margin-left:.4em}
.nightly .badge.reg,.nightly .badge.failed{background:#fde8e7} .nightly .badge.settings{background:#eee8fb} .nightly .badge.version{background:#e6eefb} .nightly ul.changes{margin:.3em 0;padding-left:1.2em}`

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunefleet nightly {{.Nightly}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #dde}
{{.CSS}}
</style></head><body>
{{.Body}}
</body></html>
`))

var body = template.Must(template.New("body").Funcs(template.FuncMap{
	"statusChart":  statusChart,
	"secondsChart": secondsChart,
	"graphChart":   graphChart,
	"fmtBench":     FormatBench,
	"kind":         func(k string) string { return strings.ReplaceAll(k, "_", " ") },
	"dur":          dur,
	"when":         human.Time,
	"bad":          func(e Entry) bool { return e.bad() },
	"quiet":        func(e Entry) bool { return e.quiet() },
	"quietLine":    quietLine,
	"anchor":       EntryAnchor,
	// dict pairs a name with its URL for the "link" template.
	"dict": func(name, url string) struct{ Name, URL string } { return struct{ Name, URL string }{name, url} },
}).Parse(`<div class="nightly" id="nightly" data-nightly="{{.Nightly}}">
{{define "link"}}{{if .URL}}<a href="{{.URL}}">{{.Name}}</a>{{else}}{{.Name}}{{end}}{{end}}
<h1>Nightly {{template "link" (dict .Nightly (.L.Nightly .Nightly))}}</h1>
<div class="meta">fleet {{.FleetDigest}} · planned {{when .PlanCreatedAt}} · report generated {{when .GeneratedAt}}</div>
{{with .Totals}}
<p id="totals"><b>{{.Entries}}</b> model × target: <span class="done">{{.Done}} done</span>, <span class="failed">{{.Failed}} failed</span>, <span class="pending">{{.Pending}} pending</span>, {{.Unchanged}} unchanged.
<span class="{{if .Regressions}}reg{{end}}">{{.Regressions}} regression(s)</span>{{if .NewlyFailing}}, <span class="reg">{{.NewlyFailing}} newly failing</span>{{end}}{{if .Faster}}, {{.Faster}} faster{{end}}{{if .WinnerChanges}}, {{.WinnerChanges}} winner change(s){{end}}{{if .Recovered}}, {{.Recovered}} recovered{{end}}{{if .NewVersions}}, <span class="version">{{.NewVersions}} new version(s)</span>{{end}}{{if .Remeasured}}, {{.Remeasured}} graph(s) measured again{{end}}{{if .SettingsChanged}}, <span class="settings">{{.SettingsChanged}} with settings changed</span>{{end}}.</p>
{{end}}
{{with .Finish}}<p class="finish">{{.Line}}</p>{{end}}
{{with .Webhook}}<p id="webhook-delivery" class="{{if eq .Delivery "failed"}}failed{{end}}" data-delivery="{{.Delivery}}">{{.Line}}</p>{{end}}
<div class="charts">{{statusChart .Totals}}{{secondsChart .Summary}}</div>
<h2>Models</h2>
<p class="meta">Failures first, then regressions, then new versions, then settings changes, then the rest.</p>
{{if .Totals.NewVersions}}<h2>New versions</h2>
<ul id="new-versions">{{range .Entries}}{{if .NewVersion}}<li class="new-version" data-model="{{.Model}}" data-target="{{.Target}}">{{.Model}} on {{.Target}}: {{.NewVersion}}</li>{{end}}{{end}}</ul>{{end}}
<table id="entries"><tr><th>model</th><th>target</th><th>outcome</th><th>status</th><th class="num">regressions</th><th class="num">spent</th><th class="num">saved</th><th>run</th><th>previous</th></tr>
{{$l := .L}}{{range .Entries}}<tr class="entry-row{{if bad .}} bad{{end}}" data-model="{{.Model}}" data-target="{{.Target}}"><td>{{if .Platform}}{{template "link" (dict .Model ($l.Model .Model))}}{{else}}{{.Model}}{{end}}</td><td>{{.Target}}</td><td>{{.Outcome}}{{if .Carried}} (carried){{end}}</td><td class="{{.Status}}">{{.Status}}{{if .NewVersion}} <span class="badge version">new version</span>{{end}}{{if .SettingsChanged}} <span class="badge settings">settings changed</span>{{end}}</td><td class="num{{if .Regressions}} reg{{end}}">{{.Regressions}}</td><td class="num">{{dur .SpentSeconds}}</td><td class="num">{{dur .SavedSeconds}}</td>
<td>{{template "link" (dict .Run ($l.Run .Run))}}</td><td>{{template "link" (dict .PreviousRun ($l.Run .PreviousRun))}}{{with $l.Compare .PreviousRun .Run}} <a class="compare" href="{{.}}">compare</a>{{end}}</td></tr>
{{end}}</table>
{{range .Entries}}<div class="entry{{if bad .}} bad{{end}}" id="{{anchor .Model .Target}}"><h3>{{.Model}} on {{.Target}}<span class="badge {{.Status}}">{{.Status}}</span>{{if .Regressions}}<span class="badge reg">{{.Regressions}} regression(s)</span>{{end}}{{if .NewVersion}}<span class="badge version">new version</span>{{end}}{{if .SettingsChanged}}<span class="badge settings">settings changed</span>{{end}}</h3>
<div class="meta">{{if .Platform}}platform {{.Platform}} · {{end}}{{if .Run}}run {{template "link" (dict .Run ($l.Run .Run))}}{{end}}{{if .Carried}} · <span class="carried">carried forward{{with .CarriedFrom}} from nightly {{template "link" (dict . ($l.Nightly .))}}{{end}}: its work was done, nothing ran tonight</span>{{else if .PreviousRun}} · compared with {{template "link" (dict .PreviousRun ($l.Run .PreviousRun))}}{{with $l.Compare .PreviousRun .Run}} (<a class="compare-previous" href="{{.}}">compare the two runs</a>){{end}}{{else if .Run}} · first entry of its history{{end}}</div>
{{if .Error}}<p class="failed">{{.Error}}</p>{{end}}
{{range .Reasons}}<p class="failed">{{.}}</p>{{end}}
{{if .Changes}}<ul class="changes">{{range .Changes}}<li class="change {{.Kind}}{{if .Regression}} reg{{end}}{{if eq .Kind "settings_changed"}} settings{{end}}{{if eq .Kind "new_version"}} version{{end}}">{{if .Graph}}graph {{.Graph}}: {{end}}{{kind .Kind}}: {{.Detail}}</li>{{end}}</ul>{{end}}
{{if .Graphs}}{{if quiet .}}<p class="meta quiet" data-graphs="{{len .Graphs}}">{{quietLine .}}{{with $l.Run .Run}} · <a href="{{.}}">its run lists them</a>{{end}}</p>
{{else}}{{graphChart .}}
<table><tr><th>graph</th><th>status</th><th>winner</th><th>reused</th><th>tonight</th><th>before</th></tr>
{{range .Graphs}}<tr><td>{{.Name}}</td><td class="{{.Status}}">{{.Status}}</td><td>{{.Candidate}}{{if and .PreviousCandidate (ne .PreviousCandidate .Candidate)}} (was {{.PreviousCandidate}}){{end}}</td><td>{{if .Reused}}yes{{end}}</td><td>{{fmtBench .Bench}}</td><td>{{fmtBench .PreviousBench}}</td></tr>
{{end}}</table>{{end}}{{end}}
</div>
{{end}}</div>
`))

// FormatBench is a measurement in the units the charts use (3.87M/s),
// with its interval over its rounds (which contains it) and, when it is
// unstable, the cause its measurement recorded.
func FormatBench(b *history.Bench) string {
	if b == nil {
		return "—"
	}
	st := b.Stats()
	interval := ""
	if lo, hi, ok := st.ThroughputInterval(); ok {
		interval = fmt.Sprintf(" (%s–%s)", svgchart.Num(lo), svgchart.Num(hi))
	}
	cause := ""
	if !b.Stable {
		cause = " · unstable: " + st.Cause()
	}
	return fmt.Sprintf("%s/s%s%s · p50 %s ms · p90 %s ms · cv %.3f · batch %d%s", svgchart.Num(b.Throughput), history.UnstableMark(b), interval,
		svgchart.Num(b.P50Ms), svgchart.Num(b.P90Ms), b.CV, b.BatchSize, cause)
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
		{Label: "settings changed", Value: float64(t.SettingsChanged), Fill: "#6b4fbb"},
		{Label: "new versions", Value: float64(t.NewVersions), Fill: "#3567c8"},
	}, trimNum)
}

// secondsChart is device time spent and saved, with bars only for the
// kinds of device the nightly ran on (a CPU-only night shows no GPU bars).
func secondsChart(s *Summary) template.HTML {
	t := s.Totals
	usesCPU, usesGPU := s.devices()
	gpu := usesGPU || t.GPUSecondsSpent > 0 || t.GPUSecondsSaved > 0
	cpu := usesCPU || t.CPUSecondsSpent > 0 || t.CPUSecondsSaved > 0
	var bars []svgchart.Bar
	if gpu || !cpu {
		bars = append(bars, svgchart.Bar{Label: "GPU spent", Value: t.GPUSecondsSpent, Fill: "#3567c8"},
			svgchart.Bar{Label: "GPU saved", Value: t.GPUSecondsSaved, Fill: "#9db7ea"})
	}
	if cpu || !gpu {
		bars = append(bars, svgchart.Bar{Label: "CPU spent", Value: t.CPUSecondsSpent, Fill: "#6b4fbb"},
			svgchart.Bar{Label: "CPU saved", Value: t.CPUSecondsSaved, Fill: "#c3b5ea"})
	}
	return svgchart.HBars("Device time: spent vs saved by reuse", bars, dur)
}

// graphChart draws each graph's throughput tonight relative to the
// previous entry's, as a bar from zero change: a regression of a few
// percent is as visible as a tenfold one (linear bars of the two
// throughputs made it a sliver). Red is slower beyond noise, green
// faster, purple a move the settings explain, grey within noise.
func graphChart(e Entry) template.HTML {
	moved := map[string]string{}
	for _, c := range e.Changes {
		switch {
		case c.Kind == history.ChangeSlower || c.Kind == history.ChangeFaster:
			moved[c.Graph] = c.Kind
		case (c.Kind == history.ChangeSettings || c.Kind == history.ChangeNewVersion) && c.Graph != "":
			moved[c.Graph] = c.Kind
		}
	}
	var bars []svgchart.Delta
	for _, g := range e.Graphs {
		if g.Bench == nil || g.PreviousBench == nil || g.PreviousBench.Throughput <= 0 {
			continue
		}
		fill := "#8a94a8"
		switch moved[g.Name] {
		case history.ChangeSlower:
			fill = "#d9443a"
		case history.ChangeFaster:
			fill = "#2f9e5a"
		case history.ChangeSettings:
			fill = "#6b4fbb"
		case history.ChangeNewVersion:
			fill = "#3567c8"
		}
		bars = append(bars, svgchart.Delta{Label: "graph " + g.Name, Ratio: g.Bench.Throughput / g.PreviousBench.Throughput, Fill: fill,
			Title: fmt.Sprintf("graph %s: %s/s before, %s/s tonight", g.Name, svgchart.Num(g.PreviousBench.Throughput), svgchart.Num(g.Bench.Throughput))})
	}
	return svgchart.Deltas("throughput per graph, tonight vs before", bars, []svgchart.Key{
		{Fill: "#d9443a", Label: "slower (beyond noise)"}, {Fill: "#2f9e5a", Label: "faster"},
		{Fill: "#8a94a8", Label: "within noise"}, {Fill: "#6b4fbb", Label: "settings changed"},
		{Fill: "#3567c8", Label: "new version (not compared)"},
	})
}
