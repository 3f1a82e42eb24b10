package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/tunefleet/tunefleet/tuner"
)

// redrawEvery bounds how often the progress line is redrawn for calls
// alone; a new phase or batch size is drawn at once.
const redrawEvery = 100 * time.Millisecond

// tuneProgress is `worker tune`'s progress on stderr. On a terminal, one
// status line (the graph, the candidate, its phase, the batch size and the
// calls measured so far) is redrawn in place under the tuner's step lines,
// so that a candidate measuring for half a minute visibly moves. Elsewhere
// (a pipe, a file, CI logs) it writes a plain line as each phase and batch
// size starts, and no call counts: nothing there redraws.
type tuneProgress struct {
	w     io.Writer
	tty   bool
	width int // the terminal's columns: a longer line would wrap and not redraw

	mu     sync.Mutex
	status string // the status line drawn now, "" when none
	drawn  time.Time
}

// newTuneProgress draws on w: redrawn in place when live (w is a
// terminal), else plain lines.
func newTuneProgress(w io.Writer, live bool) *tuneProgress {
	p := &tuneProgress{w: w}
	if f, ok := w.(*os.File); ok && live {
		p.tty = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			p.width = cols
		}
	}
	return p
}

// Write takes the tuner's step lines (tuner.Options.Progress): on a
// terminal, the status line is cleared, the lines written, and the status
// drawn again below them.
func (p *tuneProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.status != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
		defer p.draw()
	}
	return p.w.Write(b)
}

// observe is the tuner's Observer.
func (p *tuneProgress) observe(s tuner.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if line := plainStep(s); line != "" {
			fmt.Fprintln(p.w, line)
		}
		return
	}
	if s.Done {
		return // the next step, or the tuner's line, says what follows
	}
	p.status = statusLine(s)
	if s.Calls > 0 && time.Since(p.drawn) < redrawEvery {
		return
	}
	p.draw()
}

// draw redraws the status line; p.mu is held.
func (p *tuneProgress) draw() {
	line := p.status
	if p.width > 1 && len([]rune(line)) >= p.width {
		line = string([]rune(line)[:p.width-2]) + "…"
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
	p.drawn = time.Now()
}

// finish clears the status line, leaving the terminal as the table finds
// it.
func (p *tuneProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.status != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = ""
	}
}

// statusLine is a terminal's view of a step.
func statusLine(s tuner.Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s · candidate %d/%d %s · %s", s.Graph, s.Index+1, s.Count, s.Candidate, s.Phase)
	if s.BatchSize > 0 {
		fmt.Fprintf(&b, " · batch %d · %d calls", s.BatchSize, s.Calls)
	}
	return b.String()
}

// plainStep is the line a phase or a batch size starts with, "" for the
// steps a plain log leaves out (ends, call counts).
func plainStep(s tuner.Step) string {
	if s.Done || s.Calls > 0 {
		return ""
	}
	prefix := fmt.Sprintf("graph %s: %s (%d/%d): ", s.Graph, s.Candidate, s.Index+1, s.Count)
	switch {
	case s.BatchSize > 0:
		return prefix + fmt.Sprintf("measuring batch %d", s.BatchSize)
	case s.Phase == tuner.PhaseBuild:
		return prefix + "building"
	case s.Phase == tuner.PhaseCheck:
		return prefix + "checking outputs"
	}
	return prefix + "benchmarking"
}
