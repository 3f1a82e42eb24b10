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
}

// Chart geometry: the plot area sits inside these margins.
const (
	linesW, linesH                 = 640, 260
	plotL, plotR, plotT, plotB     = 64, 190, 30, 40
	plotW, plotH                   = linesW - plotL - plotR, linesH - plotT - plotB
	markRadius, pointRadius, ticks = 6, 3.5, 4
)

// SVG draws the chart. A chart without a point draws nothing.
func (l Lines) SVG() template.HTML {
	format := l.Format
	if format == nil {
		format = Num
	}
	xs := l.categories()
	points, max := 0, 0.0
	for _, s := range l.Series {
		points += len(s.Points)
		for _, p := range s.Points {
			max = math.Max(max, math.Max(p.Y, p.Hi))
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
			return plotL + plotW/2
		}
		return plotL + float64(plotW)*float64(i)/float64(len(xs)-1)
	}
	yAt := func(y float64) float64 { return plotT + plotH - plotH*y/max }
	var b strings.Builder
	open(&b, "lines", l.Title, linesW, linesH, len(l.Series), points)
	l.axes(&b, xs, max, format, xAt)
	var keys []Key
	for i, s := range l.Series {
		c := Color(i)
		keys = append(keys, Key{Fill: c, Label: s.Name})
		fmt.Fprintf(&b, `<g class="series" data-name="%s" data-points="%d">`, esc(s.Name), len(s.Points))
		if len(s.Points) > 1 {
			pts := make([]string, len(s.Points))
			for j, p := range s.Points {
				pts[j] = fmt.Sprintf("%.1f,%.1f", xAt(p.X), yAt(p.Y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(pts, " "))
		}
		for _, p := range s.Points {
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
	legendSVG(&b, linesW-plotR+16, plotT, keys)
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

// axes draws the frame, Y grid lines with labels and the X categories
// (every one when they fit, else about ten).
func (l Lines) axes(b *strings.Builder, xs []string, top float64, format func(float64) string, xAt func(string) float64) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#99a"/>`, plotL, plotT+plotH, plotL+plotW, plotT+plotH)
	for i := 0; i <= ticks; i++ {
		v := top * float64(i) / ticks
		y := float64(plotT+plotH) - float64(plotH)*float64(i)/ticks
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e5ee"/>`, plotL, y, plotL+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="10" fill="#667" text-anchor="end">%s</text>`, plotL-4, y+3, esc(format(v)))
	}
	step := max(len(xs)/10, 1)
	for i, x := range xs {
		if i%step != 0 && i != len(xs)-1 {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="10" fill="#667" text-anchor="middle">%s</text>`, xAt(x), plotT+plotH+14, esc(x))
	}
	if l.XLabel != "" {
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>`, plotL+plotW/2, linesH-6, esc(l.XLabel))
	}
	if l.YLabel != "" {
		fmt.Fprintf(b, `<text x="12" y="%d" font-size="11" text-anchor="middle" transform="rotate(-90 12 %d)">%s</text>`, plotT+plotH/2, plotT+plotH/2, esc(l.YLabel))
	}
}
