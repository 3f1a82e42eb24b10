package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
)

// barMin is the smallest transfer that gets a bar (or progress lines):
// below it, a transfer ends before either would say anything.
const barMin = 16 << 20

// lineStep is how far a transfer moves between two progress lines when w
// is not a terminal: a quarter, so a log gets four lines, not hundreds.
const lineStep = 25

// withTransferBar returns a context whose uploads and downloads show their
// progress on w, and a function that ends it. On a terminal it is a bar
// redrawn in place; elsewhere (a pipe, a file, CI logs) a plain line at
// each quarter and one at the end, which a log keeps readable. Transfers
// under barMin show nothing.
//
// Off a terminal it shows nothing unless --progress asks (a script that
// merges stderr into -o json must read only JSON), and -q silences it
// everywhere (grammar.go).
func withTransferBar(cmd *cobra.Command, what string) (context.Context, func()) {
	ctx, w := cmd.Context(), cmd.ErrOrStderr()
	mode := progressOn(cmd, w)
	if mode == progressNone {
		return ctx, func() {}
	}
	b := &transferBar{w: w, what: what, lines: mode == progressLines}
	return artifacts.WithProgress(ctx, b), b.finish
}

// transferBar is an artifacts.Progress drawn with progressbar (or as
// lines), started once the expected total is worth it.
type transferBar struct {
	w     io.Writer
	what  string
	lines bool // plain lines instead of a bar
	mu    sync.Mutex
	total int64
	moved int64
	bar   *progressbar.ProgressBar
	said  int // with lines: the last step said, in percent (-1: none yet)
	shown bool
}

func (t *transferBar) Expect(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += n
	switch {
	case t.lines:
		if t.total >= barMin && !t.shown {
			t.shown, t.said = true, -lineStep
		}
		t.sayLine()
	case t.bar != nil:
		t.bar.ChangeMax64(t.total)
	case t.total >= barMin:
		t.bar = progressbar.NewOptions64(t.total,
			progressbar.OptionSetWriter(t.w),
			progressbar.OptionSetDescription(t.what),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		t.bar.Add64(t.moved)
	}
}

func (t *transferBar) Moved(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moved += n
	if t.lines {
		t.sayLine()
	} else if t.bar != nil {
		t.bar.Add64(n)
	}
}

// sayLine prints a line when the transfer has crossed the next step.
// Callers hold mu.
func (t *transferBar) sayLine() {
	if !t.shown || t.total <= 0 {
		return
	}
	pct := int(min(t.moved*100/t.total, 100))
	if step := pct / lineStep * lineStep; step > t.said && step < 100 {
		t.said = step
		fmt.Fprintf(t.w, "%s: %d%% (%s of %s)\n", t.what, step, mib(t.moved), mib(t.total))
	}
}

func (t *transferBar) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lines && t.shown {
		fmt.Fprintf(t.w, "%s: done, %s\n", t.what, mib(t.moved))
	}
	if t.bar != nil {
		t.bar.Finish()
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
