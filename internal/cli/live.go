package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/tunefleet/tunefleet/runstate"
	"golang.org/x/term"
)

// liveTable redraws a block of text in place on a terminal: each draw
// moves the cursor back up over the rows the last one took and clears
// them. It is only made for a terminal (liveOn); everywhere else progress
// is plain lines, which a log or a pipe keeps readable.
type liveTable struct {
	w     io.Writer
	size  func() (width, height int, err error)
	rows  int    // terminal rows the last draw took
	drawn string // what the last draw showed
}

// liveOn returns a liveTable drawing on w, or nil when w is not a
// terminal.
func liveOn(w io.Writer) *liveTable {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &liveTable{w: w, size: func() (int, int, error) { return term.GetSize(int(f.Fd())) }}
}

// draw shows text in place of what the last draw showed; the same text
// again draws nothing. A text taller than the terminal is cut to fit
// (cursor movement cannot reach rows scrolled away), saying how much was
// left out.
func (l *liveTable) draw(text string) {
	if text == l.drawn {
		return
	}
	l.drawn = text
	width, height, err := l.size()
	if err != nil || width <= 0 || height <= 1 {
		width, height = 0, 0
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if height > 0 && len(lines) > height-1 {
		keep := max(height-2, 0)
		lines = append(lines[:keep], fmt.Sprintf("… %d more line(s): a taller terminal, or -o json, shows them", len(lines)-keep))
	}
	var b strings.Builder
	if l.rows > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", l.rows)
	}
	b.WriteString("\r\x1b[J")
	l.rows = 0
	for _, line := range lines {
		b.WriteString(line)
		b.WriteByte('\n')
		l.rows += rowsOf(line, width)
	}
	io.WriteString(l.w, b.String())
}

// forget makes the next draw start below whatever was written since the
// last one (a notice), instead of drawing over it.
func (l *liveTable) forget() { l.rows, l.drawn = 0, "" }

// rowsOf is how many terminal rows a line takes at width (0: unknown, one
// row), a line longer than the terminal wrapping onto more.
func rowsOf(line string, width int) int {
	n := utf8.RuneCountInString(line)
	if width <= 0 || n <= width {
		return 1
	}
	return (n + width - 1) / width
}

// runLines prints a run's progress as plain lines, one per change: a line
// for each graph whose state moved, then the run's totals when they moved.
type runLines struct {
	w      io.Writer
	graphs map[string]string
	total  string
}

func (l *runLines) update(st runstate.RunStatus) {
	if l.graphs == nil {
		l.graphs = map[string]string{}
	}
	for _, g := range st.GraphNames() {
		line := graphLine(st.Graphs[g])
		prev, seen := l.graphs[g]
		// A graph that merely waits for its first worker is not news.
		if !seen {
			prev = runstate.GraphPending
		}
		if line != prev {
			fmt.Fprintf(l.w, "run %s graph %s: %s\n", st.Run, g, line)
		}
		l.graphs[g] = line
	}
	total := fmt.Sprintf("run %s: %d/%d graph(s) finished (%d failed), %s", st.Run, st.Done+st.Failed+st.Cancelled, st.Total, st.Failed, st.Status)
	if total != l.total {
		fmt.Fprintln(l.w, total)
		l.total = total
	}
}

// graphLine says where a graph stands in words that change only when it
// does (no "in 3s"), so that a line means a change.
func graphLine(gs runstate.GraphStatus) string {
	switch gs.Status {
	case runstate.GraphDone:
		s := "done, winner " + gs.Winner
		if gs.Bench != nil {
			tput, batch, _ := benchCells(gs.Bench)
			s += fmt.Sprintf(", %s samples/s at batch %s (cv %.3f)", tput, batch, gs.Bench.CV)
			if !gs.Bench.Stable {
				s += ", unstable: " + gs.Bench.Stats().Cause()
			}
		}
		return s
	case runstate.GraphFailed, runstate.GraphCancelled:
		return gs.Status + ", " + gs.Class + ": " + firstLine(gs.Message, 100)
	}
	parts := []string{gs.StateText()}
	if gs.Attempts > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", gs.Attempts))
	}
	if gs.Progress != nil {
		parts = append(parts, gs.Progress.Doing())
	}
	if t := gs.Task; t != nil && t.Retried > 0 {
		parts = append(parts, fmt.Sprintf("retried %d", t.Retried))
	}
	if note := lastErrorNote(gs); note != "" {
		parts = append(parts, note)
	}
	return strings.Join(parts, ", ")
}
