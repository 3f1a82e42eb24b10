package svgchart

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
)

// Point is one point of a series at category X. Mark, when set, rings the
// point and says why in its tooltip (a winner change on a history chart).
// Lo and Hi, when Hi > Lo, are an interval drawn as a whisker through the
// point (the figure's uncertainty). Flag, when set, puts a triangle above
// the point and says why in its tooltip (outlier calls left out of it).
type Point struct {
	X      string
	Y      float64
	Title  string
	Mark   string
	Lo, Hi float64
	Flag   string
	// Failed, when set, draws the point as a red cross on the X axis (Y
	// unused) and says why in its tooltip: a run that measured nothing is
	// shown, not skipped.
	Failed string
}

// XMark marks a category with a dashed vertical line across the plot
// (class "xmark" and Class), its Label in the tooltip: e.g. where the
// settings changed.
type XMark struct {
	X, Label, Class string
	// Kind is what the line means in the legend ("new version"); Class
	// when empty.
	Kind string
	// Stroke is the line's colour ("": purple, a settings change's).
	Stroke string
}

// Series is one line.
type Series struct {
	Name   string
	Points []Point
}

// Lines is a line chart over categorical X values (batch sizes, runs),
// evenly spaced in the order of XS (or of first appearance when XS is
// empty), from zero to the largest Y.
type Lines struct {
	Title, XLabel, YLabel string
	XS                    []string
	Series                []Series
	Format                func(float64) string // Y labels; Num when nil
	// XText is a category's tick label (the category itself when nil):
	// categories stay unique (run ids) while ticks show what reads (dates).
	XText func(string) string
	// Marks are categories marked across the plot.
	Marks []XMark
	// Small draws a chart a third narrower with no series legend, for one
	// chart per series side by side; its markers' legend goes under it.
	Small bool
	// What each kind of marker means on this chart, for its legend: every
	// marker a chart draws is in its legend, with these words or, when
	// empty, generic ones.
	MarkText, FlagText, FailedText, IntervalText string
}

// Chart geometry: the plot area sits inside these margins.
const (
	markRadius, pointRadius, ticks = 6, 3.5, 4
	tickFont                       = 10
	// tickCharW is the widest a character of a tick label draws at
	// tickFont in the fonts pages fall back to (digits and '-' are
	// narrower): labels thinned by it never overlap.
	tickCharW = 0.62 * tickFont
	tickGap   = 8 // pixels kept between two tick labels
)

// geometry is one chart's size and plot area; legend is the height kept
// under the X label for a small chart's marker legend.
type geometry struct {
	w, h, l, r, t, b, pw, ph, legend int
}

// legendRow is the height of one row of a marker legend.
const legendRow = 16

func (l Lines) geometry() geometry {
	g := geometry{w: 640, h: 260, l: 64, r: 190, t: 30, b: 40}
	if l.Small {
		g = geometry{w: 420, h: 200, l: 56, r: 40, t: 30, b: 40}
		if n := len(l.markerKeys()); n > 0 {
			g.legend = legendRow * ((n + 1) / 2) // two entries a row
			g.h += g.legend
			g.b += g.legend
		}
	}
	g.pw, g.ph = g.w-g.l-g.r, g.h-g.t-g.b
	return g
}

// markerKey is one legend entry for a kind of marker: its glyph, drawn
// with its top left corner at (x, y), and what it means.
type markerKey struct {
	glyph func(b *strings.Builder, x, y int)
	label string
}

// markerKeys are the legend entries of the markers this chart draws, in
// a fixed order, each once.
func (l Lines) markerKeys() []markerKey {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	var interval, mark, flag, failed bool
	for _, s := range l.Series {
		for _, p := range s.Points {
			interval = interval || (p.Failed == "" && p.Hi > p.Lo)
			mark = mark || (p.Failed == "" && p.Mark != "")
			flag = flag || (p.Failed == "" && p.Flag != "")
			failed = failed || p.Failed != ""
		}
	}
	var keys []markerKey
	xs := l.categories()
	seen := map[string]bool{}
	for _, m := range l.Marks {
		kind := or(m.Kind, m.Class)
		if !slices.Contains(xs, m.X) || seen[kind] {
			continue
		}
		seen[kind] = true
		stroke := or(m.Stroke, "#6b4fbb")
		keys = append(keys, markerKey{func(b *strings.Builder, x, y int) {
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"/>`, x+6, y, x+6, y+12, esc(stroke))
		}, or(kind, "marked")})
	}
	if interval {
		keys = append(keys, markerKey{func(b *strings.Builder, x, y int) {
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555" stroke-width="1.5"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`,
				x+6, y, x+6, y+12, x+2, y, x+10, y, x+2, y+12, x+10, y+12)
		}, or(l.IntervalText, "interval of the figure")})
	}
	if mark {
		keys = append(keys, markerKey{func(b *strings.Builder, x, y int) {
			fmt.Fprintf(b, `<circle cx="%d" cy="%d" r="%d" fill="none" stroke="#b42318" stroke-width="2"/>`, x+6, y+6, markRadius-1)
		}, or(l.MarkText, "ringed: see its tooltip")})
	}
	if flag {
		keys = append(keys, markerKey{func(b *strings.Builder, x, y int) {
			fmt.Fprintf(b, `<path d="M%d,%d l-4,-7 h8 z" fill="#e69f00"/>`, x+6, y+10)
		}, or(l.FlagText, "flagged: see its tooltip")})
	}
	if failed {
		keys = append(keys, markerKey{func(b *strings.Builder, x, y int) {
			fmt.Fprintf(b, `<path d="M%d,%d l10,10 m0,-10 l-10,10" stroke="#d9443a" stroke-width="2.5"/>`, x+1, y+1)
		}, or(l.FailedText, "failed: nothing measured")})
	}
	return keys
}

// markerLegendSVG draws the marker legend: under a small chart's X label,
// two entries a row; beside a full chart, under its series keys.
func (l Lines) markerLegendSVG(b *strings.Builder, geo geometry, series int) {
	keys := l.markerKeys()
	for i, k := range keys {
		var x, y int
		if l.Small {
			x, y = geo.l+(i%2)*(geo.pw/2), geo.h-geo.legend+(i/2)*legendRow
		} else {
			x, y = geo.w-geo.r+16, geo.t+18*(series+i)
		}
		fmt.Fprintf(b, `<g class="legend-marker">`)
		k.glyph(b, x, y)
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="11">%s</text></g>`, x+16, y+11, esc(k.label))
	}
}

// SVG draws the chart. A chart without a point draws nothing.
func (l Lines) SVG() template.HTML {
	format := l.Format
	if format == nil {
		format = Num
	}
	xs := l.categories()
	geo := l.geometry()
	plotL, plotT, plotW, plotH := geo.l, geo.t, geo.pw, geo.ph
	points, max := 0, 0.0
	for _, s := range l.Series {
		points += len(s.Points)
		for _, p := range s.Points {
			if p.Failed == "" {
				max = math.Max(max, math.Max(p.Y, p.Hi))
			}
		}
	}
	if points == 0 {
		return ""
	}
	if max <= 0 {
		max = 1
	}
	xAt := func(x string) float64 {
		i := slices.Index(xs, x)
		if len(xs) == 1 {
			return float64(plotL + plotW/2)
		}
		return float64(plotL) + float64(plotW)*float64(i)/float64(len(xs)-1)
	}
	yAt := func(y float64) float64 { return float64(plotT+plotH) - float64(plotH)*y/max }
	var b strings.Builder
	open(&b, "lines", l.Title, geo.w, geo.h, len(l.Series), points)
	l.axes(&b, geo, xs, max, format, xAt)
	for _, m := range l.Marks {
		if !slices.Contains(xs, m.X) {
			continue
		}
		stroke := m.Stroke
		if stroke == "" {
			stroke = "#6b4fbb"
		}
		fmt.Fprintf(&b, `<line class="xmark %s" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"><title>%s</title></line>`,
			esc(m.Class), xAt(m.X), plotT, xAt(m.X), plotT+plotH, esc(stroke), esc(m.Label))
	}
	var keys []Key
	for i, s := range l.Series {
		c := Color(i)
		keys = append(keys, Key{Fill: c, Label: s.Name})
		fmt.Fprintf(&b, `<g class="series" data-name="%s" data-points="%d">`, esc(s.Name), len(s.Points))
		var pts []string
		for _, p := range s.Points {
			if p.Failed == "" {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(p.X), yAt(p.Y)))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(pts, " "))
		}
		for _, p := range s.Points {
			if p.Failed != "" {
				tip := p.Title
				if tip == "" {
					tip = fmt.Sprintf("%s at %s", s.Name, p.X)
				}
				x, y := xAt(p.X), float64(plotT+plotH)
				fmt.Fprintf(&b, `<path class="point failed" d="M%.1f,%.1f l10,10 m0,-10 l-10,10" stroke="#d9443a" stroke-width="2.5"><title>%s — %s</title></path>`,
					x-5, y-5, esc(tip), esc(p.Failed))
				continue
			}
			tip := p.Title
			if tip == "" {
				tip = fmt.Sprintf("%s at %s: %s", s.Name, p.X, format(p.Y))
			}
			class := "point"
			if p.Hi > p.Lo {
				fmt.Fprintf(&b, `<line class="interval" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, xAt(p.X), yAt(p.Lo), xAt(p.X), yAt(p.Hi), c)
				for _, y := range []float64{p.Lo, p.Hi} {
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, xAt(p.X)-4, yAt(y), xAt(p.X)+4, yAt(y), c)
				}
			}
			if p.Flag != "" {
				tip += " — " + p.Flag
				x, y := xAt(p.X), yAt(math.Max(p.Y, p.Hi))-8
				fmt.Fprintf(&b, `<path class="flag" d="M%.1f,%.1f l-4,-7 h8 z" fill="#e69f00"><title>%s</title></path>`, x, y, esc(p.Flag))
			}
			if p.Mark != "" {
				class = "point mark"
				tip += " — " + p.Mark
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%d" fill="none" stroke="#b42318" stroke-width="2"/>`, xAt(p.X), yAt(p.Y), markRadius)
			}
			fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="%.1f" fill="%s"><title>%s</title></circle>`, class, xAt(p.X), yAt(p.Y), pointRadius, c, esc(tip))
		}
		b.WriteString(`</g>`)
	}
	if !l.Small {
		legendSVG(&b, geo.w-geo.r+16, plotT, keys)
	}
	l.markerLegendSVG(&b, geo, len(keys))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// categories are XS, or the X values in the order they first appear.
func (l Lines) categories() []string {
	if len(l.XS) > 0 {
		return l.XS
	}
	var xs []string
	for _, s := range l.Series {
		for _, p := range s.Points {
			if !slices.Contains(xs, p.X) {
				xs = append(xs, p.X)
			}
		}
	}
	return xs
}

// TickStep is how many categories apart tick labels are drawn so that
// labels of up to maxChars characters, n categories over width pixels,
// never overlap: every one when they fit.
func TickStep(n, maxChars, width int) int {
	if n <= 1 {
		return 1
	}
	spacing := float64(width) / float64(n-1)
	need := float64(maxChars)*tickCharW + tickGap
	return max(int(math.Ceil(need/spacing)), 1)
}

// axes draws the frame, Y grid lines with labels and the X categories
// (every one when they fit, else every TickStep-th, from the newest back:
// the latest run always has its label).
func (l Lines) axes(b *strings.Builder, geo geometry, xs []string, top float64, format func(float64) string, xAt func(string) float64) {
	plotL, plotT, plotW, plotH := geo.l, geo.t, geo.pw, geo.ph
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#99a"/>`, plotL, plotT+plotH, plotL+plotW, plotT+plotH)
	for i := 0; i <= ticks; i++ {
		v := top * float64(i) / ticks
		y := float64(plotT+plotH) - float64(plotH)*float64(i)/ticks
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e5ee"/>`, plotL, y, plotL+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="10" fill="#667" text-anchor="end">%s</text>`, plotL-4, y+3, esc(format(v)))
	}
	text := l.XText
	if text == nil {
		text = func(x string) string { return x }
	}
	widest := 0
	for _, x := range xs {
		widest = max(widest, len([]rune(text(x))))
	}
	// The first and last labels are centred on the plot's edges: half of
	// each may reach into the margins, which are wider than that.
	step := TickStep(len(xs), widest, plotW)
	for i := len(xs) - 1; i >= 0; i -= step {
		fmt.Fprintf(b, `<text class="xtick" x="%.1f" y="%d" font-size="%d" fill="#667" text-anchor="middle">%s</text>`, xAt(xs[i]), plotT+plotH+14, tickFont, esc(text(xs[i])))
	}
	if l.XLabel != "" {
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>`, plotL+plotW/2, geo.h-geo.legend-6, esc(l.XLabel))
	}
	if l.YLabel != "" {
		fmt.Fprintf(b, `<text x="12" y="%d" font-size="11" text-anchor="middle" transform="rotate(-90 12 %d)">%s</text>`, plotT+plotH/2, plotT+plotH/2, esc(l.YLabel))
	}
}
