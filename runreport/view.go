package runreport

import (
	"fmt"
	"html/template"
	"path"
	"strconv"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// Links makes a page's links. A nil func leaves that kind of link out (a
// report.html on disk has no store to link to).
type Links struct {
	// Blob is the URL of a stored blob (a log, an engine) by its sha256
	// and the file name to save it as.
	Blob func(sha256, name string) string
	// Model is the URL of a model's page.
	Model func(model string) string
	// Run is the URL of a run's page (a reused result names the run
	// that measured it).
	Run func(run string) string
}

// link is one rendered link; URL "" shows the name alone.
type link struct {
	Name, URL, SHA256 string
	Size              int64
}

// view is the template's data: the report with its links resolved.
type view struct {
	*Report
	ModelURL string
	RunURL   func(string) string
	Graphs   []graphView
}

type graphView struct {
	Graph
	// RunURL is the view's, for a graph's section ("section" is its own
	// template: there $ is the graph).
	RunURL     func(string) string
	Candidates []candidateView
	Engine     *link
	// Head is the winner's measurement (nil without one); FailClass and
	// FailMessage why there is no winner.
	Head                   *backend.Stats
	FailClass, FailMessage string
}

type candidateView struct {
	backend.CandidateResult
	Winner   bool
	Best     *backend.Stats // the measurement the table shows
	Logs     []link
	FailText string
}

func (l Links) file(f backend.FileRef) link {
	out := link{Name: path.Base(f.Path), SHA256: f.SHA256, Size: f.Size}
	if l.Blob != nil && f.SHA256 != "" {
		out.URL = l.Blob(f.SHA256, out.Name)
	}
	return out
}

func newView(r *Report, l Links) view {
	v := view{Report: r, RunURL: l.Run}
	if l.Model != nil {
		v.ModelURL = l.Model(r.Model)
	}
	for _, g := range r.Graphs {
		v.Graphs = append(v.Graphs, newGraphView(g, l))
	}
	return v
}

// newGraphView is one graph's part of the view.
func newGraphView(g Graph, l Links) graphView {
	gv := graphView{Graph: g, RunURL: l.Run}
	if st, ok := g.Headline(); ok {
		gv.Head = &st
	}
	gv.FailClass, gv.FailMessage = g.Failure()
	if g.Result != nil {
		if w := g.Result.Winner; w != nil && w.Engine != nil {
			e := l.file(*w.Engine)
			gv.Engine = &e
		}
		for i, c := range g.Result.Results {
			cv := candidateView{CandidateResult: c, Winner: g.Result.Winner != nil && g.Result.Winner.Index == i}
			if st, ok := candidateStats(g, c, cv.Winner); ok {
				cv.Best = &st
			}
			if c.Failure != nil {
				cv.FailText = c.Failure.Message
			}
			for _, a := range c.Artifacts {
				if a.Role != "engine" {
					cv.Logs = append(cv.Logs, l.file(a))
				}
			}
			gv.Candidates = append(gv.Candidates, cv)
		}
	}
	return gv
}

// Chart is the graph's chart, drawn as the template reaches it: a run of
// 10,000 graphs would otherwise hold every graph's SVG at once (about a
// sixth of its finalize's memory).
func (g graphView) Chart() template.HTML { return batchChart(g.Graph) }

// candidateStats is the measurement a candidate's row shows: the winner's
// at the batch it was chosen at, the others' best throughput.
func candidateStats(g Graph, c backend.CandidateResult, winner bool) (backend.Stats, bool) {
	if winner {
		return g.Headline()
	}
	return c.BestThroughput(0)
}

// batchChart is a graph's throughput against batch size, one series per
// measured candidate, one point per batch size it was measured at.
func batchChart(g Graph) template.HTML {
	measured := g.Measured()
	if len(measured) == 0 {
		return ""
	}
	var xs []string
	for _, b := range g.Batches() {
		xs = append(xs, strconv.Itoa(b))
	}
	ch := svgchart.Lines{Title: "graph " + g.Name + ": throughput vs batch size", XLabel: "batch size", YLabel: "samples/s", XS: xs,
		IntervalText: "interval of the figure", FlagText: "outlier calls left out"}
	for _, c := range measured {
		s := svgchart.Series{Name: c.Candidate}
		for _, st := range c.Benchmarks {
			p := svgchart.Point{X: strconv.Itoa(st.BatchSize), Y: st.Throughput,
				Title: fmt.Sprintf("%s, batch %d: %s samples/s%s (the figure the pick uses: the centre of its interval), p50 %s ms, p90 %s ms, p99 %s ms, %d calls%s", c.Candidate, st.BatchSize,
					svgchart.Num(st.Throughput), intervalText(st), ms(st.P50Ms), ms(st.P90Ms), ms(st.P99Ms), st.Samples, unstable(st))}
			p.Lo, p.Hi, _ = st.ThroughputInterval()
			if st.Outliers > 0 {
				p.Flag = fmt.Sprintf("%d outlier call(s) left out (slowest %s ms; fences %s–%s ms)", st.Outliers, ms(st.OutlierMaxMs), ms(st.FenceLoMs), ms(st.FenceHiMs))
			}
			s.Points = append(s.Points, p)
		}
		ch.Series = append(ch.Series, s)
	}
	return ch.SVG()
}

// summaryChart is the winners' throughput, one bar per graph that has one.
func summaryChart(r *Report) template.HTML {
	var bars []svgchart.Bar
	for _, g := range r.Graphs {
		if b, ok := summaryBar(g); ok {
			bars = append(bars, b)
		}
	}
	if len(bars) == 0 {
		return ""
	}
	return svgchart.HBars(summaryTitle, bars, nil)
}

const summaryTitle = "winner's throughput per graph (samples/s)"

// summaryBar is a graph's bar in the summary chart; none without a winner's
// measurement.
func summaryBar(g Graph) (svgchart.Bar, bool) {
	st, ok := g.Headline()
	if !ok {
		return svgchart.Bar{}, false
	}
	return svgchart.Bar{Label: "graph " + g.Name, Value: st.Throughput, Fill: svgchart.Color(0),
		Title: fmt.Sprintf("%s at batch %d", g.Winner(), st.BatchSize)}, true
}

func ms(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// intervalText is a figure's interval over its rounds, " (lo–hi)", or ""
// without one.
func intervalText(st backend.Stats) string {
	lo, hi, ok := st.ThroughputInterval()
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (%s–%s over %d rounds)", svgchart.Num(lo), svgchart.Num(hi), len(st.RoundMs))
}

func unstable(st backend.Stats) string {
	out := ""
	if st.Short {
		out = fmt.Sprintf(" (measured from %d calls)", st.Samples)
	}
	if st.Stable {
		return out
	}
	return out + " (unstable: " + st.Cause() + ")"
}
