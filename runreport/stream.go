package runreport

import (
	"fmt"
	"io"

	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// Stream writes report.html for a run too large to hold (a finalize of
// 10,000 graphs): each graph's table row and section are rendered as the
// graph is added, into writers of the caller's (files), and only its bar
// of the summary chart is kept; Page then writes the page around them.
// What it writes is byte for byte what Page writes for the report with
// every graph in it.
type Stream struct {
	rows, sections io.Writer
	bars           []svgchart.Bar
}

// NewStream renders the graphs' rows into rows and their sections into
// sections.
func NewStream(rows, sections io.Writer) *Stream {
	return &Stream{rows: rows, sections: sections}
}

// Add renders one graph, in the report's order; nothing of its result is
// kept.
func (s *Stream) Add(g Graph) error {
	gv := newGraphView(g, Links{})
	if err := body.ExecuteTemplate(s.rows, "row", gv); err != nil {
		return fmt.Errorf("render graph %s: %w", g.Name, err)
	}
	if err := body.ExecuteTemplate(s.sections, "section", gv); err != nil {
		return fmt.Errorf("render graph %s: %w", g.Name, err)
	}
	if b, ok := summaryBar(g); ok {
		s.bars = append(s.bars, b)
	}
	return nil
}

// Page writes report.html: r's head (r.Graphs is not read: the graphs are
// those added), and the rows and sections Add wrote, read back from rows
// and sections.
func (s *Stream) Page(w io.Writer, r *Report, rows, sections io.Reader) error {
	if err := writePageHead(w, r); err != nil {
		return err
	}
	head := *r
	head.Graphs = nil
	v := newView(&head, Links{})
	parts := []func() error{
		func() error { return body.ExecuteTemplate(w, "top", v) },
		func() error {
			if len(s.bars) == 0 {
				return nil
			}
			return svgchart.WriteHBars(w, summaryTitle, s.bars, nil)
		},
		func() error { return body.ExecuteTemplate(w, "tablehead", v) },
		func() error { _, err := io.Copy(w, rows); return err },
		func() error { return body.ExecuteTemplate(w, "middle", v) },
		func() error { _, err := io.Copy(w, sections); return err },
		func() error { return body.ExecuteTemplate(w, "bottom", v) },
	}
	for _, part := range parts {
		if err := part(); err != nil {
			return fmt.Errorf("render run %s: %w", r.Run, err)
		}
	}
	_, err := io.WriteString(w, pageTail)
	return err
}
