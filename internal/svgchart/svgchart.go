package svgchart

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/tunefleet/tunefleet/internal/human"
)

// palette is a colour-blind-friendly set (Okabe–Ito, without yellow, which
// does not show on white): series i gets palette[i%len].
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#56b4e9", "#e69f00", "#000000"}

// Color is the colour of series i.
func Color(i int) string { return palette[i%len(palette)] }

// Num formats a value for an axis or a label as every table does
// (human.Number): 3.48M, 1234, 0.00226.
func Num(v float64) string { return human.Number(v) }

func esc(s string) string { return html.EscapeString(s) }

// open starts an <svg> with its data attributes.
func open(b io.Writer, kind, title string, w, h, series, points int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="%s" data-series="%d" data-points="%d" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		kind, series, points, w, h, w, h, esc(title))
	fmt.Fprintf(b, `<text x="0" y="15" font-size="13" font-weight="600">%s</text>`, esc(title))
}

// Bar is one bar: its label, value, fill colour and tooltip (the value,
// formatted, when empty).
type Bar struct {
	Label string
	Value float64
	Fill  string
	Title string
}

// HBars draws labelled horizontal bars, one per value, scaled to the
// largest, each followed by its value as format writes it (Num when nil).
func HBars(title string, bars []Bar, format func(float64) string) template.HTML {
	var b strings.Builder
	WriteHBars(&b, title, bars, format) // a strings.Builder does not fail
	return template.HTML(b.String())
}

// WriteHBars writes HBars's chart to w as it draws it (a chart of
// thousands of bars is not held as a string first), and returns w's
// first error.
func WriteHBars(w io.Writer, title string, bars []Bar, format func(float64) string) error {
	if format == nil {
		format = Num
	}
	b := &errWriter{w: w}
	const w0, rowH, labelW, top = 420, 26, 110, 28
	h := top + rowH*len(bars) + 8
	max := 0.0
	for _, br := range bars {
		max = math.Max(max, br.Value)
	}
	open(b, "hbars", title, w0, h, 1, len(bars))
	io.WriteString(b, `<g class="series">`)
	for i, br := range bars {
		if b.err != nil {
			return b.err
		}
		y := top + i*rowH
		bw := 0.0
		if max > 0 {
			// A value above zero stays visible next to a hundredfold one.
			bw = math.Max((w0-labelW-80)*br.Value/max, minBar)
		}
		if br.Value <= 0 {
			bw = 0
		}
		tip := br.Title
		if tip == "" {
			tip = format(br.Value)
		}
		fmt.Fprintf(b, `<text x="0" y="%d" font-size="12">%s</text>`, y+15, esc(br.Label))
		fmt.Fprintf(b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="18" fill="%s"><title>%s</title></rect>`, labelW, y+2, bw, br.Fill, esc(tip))
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="12">%s</text>`, float64(labelW)+bw+6, y+15, esc(format(br.Value)))
	}
	io.WriteString(b, `</g></svg>`)
	return b.err
}

// errWriter keeps the first error of w and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// minBar is the narrowest a bar of a value above zero is drawn.
const minBar = 3

// Delta is one relative change: Ratio is after/before (1: no change).
type Delta struct {
	Label string
	Ratio float64
	Fill  string
	Title string
}

// Deltas draws relative changes as horizontal bars from a zero line, on a
// log scale of the ratio (so ×2 and ×½ are as long), scaled to the
// largest change but at least ±10%: a single 8% regression shows as a
// bar, not as a sliver on top of a tall one. Each bar is labelled with
// its change in percent. It draws nothing without a bar.
func Deltas(title string, deltas []Delta, legend []Key) template.HTML {
	if len(deltas) == 0 {
		return ""
	}
	const labelW, half, rowH, top, legendW = 90, 150, 24, 30, 170
	w := labelW + 2*half + 60 + legendW
	h := max(top+rowH*len(deltas)+10, top+18*len(legend)+10)
	span := math.Log(1.1)
	for _, d := range deltas {
		if d.Ratio > 0 {
			span = math.Max(span, math.Abs(math.Log(d.Ratio)))
		}
	}
	zero := float64(labelW + half)
	var b strings.Builder
	open(&b, "deltas", title, w, h, 1, len(deltas))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#99a"/>`, zero, top-4, zero, top+rowH*len(deltas))
	b.WriteString(`<g class="series">`)
	for i, d := range deltas {
		y := top + i*rowH
		r := 0.0
		if d.Ratio > 0 {
			r = math.Log(d.Ratio)
		}
		bw := math.Max(half*math.Abs(r)/span, minBar)
		x := zero
		if r < 0 {
			x = zero - bw
		}
		pctText := fmt.Sprintf("%+.1f%%", 100*(d.Ratio-1))
		tip := d.Title
		if tip == "" {
			tip = pctText
		} else {
			tip += " (" + pctText + ")"
		}
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="12">%s</text>`, y+14, esc(d.Label))
		fmt.Fprintf(&b, `<rect class="bar" data-ratio="%.4f" x="%.1f" y="%d" width="%.1f" height="16" fill="%s"><title>%s</title></rect>`, d.Ratio, x, y+2, bw, d.Fill, esc(tip))
		// The label sits right of the bar, or right of zero for a bar
		// to its left.
		lx := zero + bw + 4
		if r < 0 {
			lx = zero + 4
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%s</text>`, lx, y+14, esc(pctText))
	}
	b.WriteString(`</g>`)
	legendSVG(&b, w-legendW+10, top, legend)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// Group is a labelled group of columns drawn side by side.
type Group struct {
	Label string
	Bars  []Bar // Label unused; a zero Fill skips the column's slot
}

// Key is one entry of a chart's legend.
type Key struct {
	Fill, Label string
}

// Columns draws groups of vertical columns on one scale, with a legend.
// A group's bars keep their slots, so "before" and "after" columns line up
// across groups. It draws nothing when every value is zero.
func Columns(title string, groups []Group, legend []Key) template.HTML {
	const groupW, barW, h, base, left = 90, 30, 190, 150, 50
	max, n := 0.0, 0
	for _, g := range groups {
		for _, br := range g.Bars {
			max = math.Max(max, br.Value)
			if br.Fill != "" {
				n++
			}
		}
	}
	if max == 0 {
		return ""
	}
	w := left + groupW*len(groups) + 160
	var b strings.Builder
	open(&b, "columns", title, w, h, 1, n)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#99a"/>`, left-4, base, w-150, base)
	fmt.Fprintf(&b, `<text x="0" y="34" font-size="11" fill="#667">%s</text>`, Num(math.Round(max)))
	b.WriteString(`<g class="series">`)
	for i, g := range groups {
		x := left + i*groupW
		for j, br := range g.Bars {
			if br.Fill == "" {
				continue
			}
			bh := float64(base-30) * br.Value / max
			fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s</title></rect>`,
				x+j*(barW+2), float64(base)-bh, barW, bh, br.Fill, esc(br.Title))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12">%s</text>`, x, base+16, esc(g.Label))
	}
	b.WriteString(`</g>`)
	legendSVG(&b, w-140, 40, legend)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func legendSVG(b *strings.Builder, x, y int, keys []Key) {
	for i, k := range keys {
		ky := y + 18*i
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`, x, ky, k.Fill, x+16, ky+11, esc(k.Label))
	}
}
