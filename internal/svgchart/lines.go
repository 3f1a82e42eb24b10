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
	// Small draws a chart a third narrower with no legend, for one chart
	// per series side by side.
	Small bool
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

// geometry is one chart's size and plot area.
type geometry struct {
	w, h, l, r, t, b, pw, ph int
}

func (l Lines) geometry() geometry {
	g := geometry{w: 640, h: 260, l: 64, r: 190, t: 30, b: 40}
	if l.Small {
		g = geometry{w: 420, h: 200, l: 56, r: 40, t: 30, b: 40}
	}
	g.pw, g.ph = g.w-g.l-g.r, g.h-g.t-g.b
	return g
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
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>`, plotL+plotW/2, geo.h-6, esc(l.XLabel))
	}
	if l.YLabel != "" {
		fmt.Fprintf(b, `<text x="12" y="%d" font-size="11" text-anchor="middle" transform="rotate(-90 12 %d)">%s</text>`, plotT+plotH/2, plotT+plotH/2, esc(l.YLabel))
	}
}
