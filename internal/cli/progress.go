package cli

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tunefleet/tunefleet/artifacts"
)

// barMin is the smallest transfer that gets a bar: below it, a transfer
// ends before a bar would say anything.
const barMin = 16 << 20

// withTransferBar returns a context whose uploads and downloads draw a
// progress bar on w, and a function that ends the bar. Nothing is drawn
// when w is not a terminal (a pipe, a file, CI logs) or the transfer is
// small: scripts read stdout and stderr, and a bar would only be noise.
func withTransferBar(ctx context.Context, w io.Writer, what string) (context.Context, func()) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return ctx, func() {}
	}
	b := &transferBar{w: f, what: what}
	return artifacts.WithProgress(ctx, b), b.finish
}

// transferBar is an artifacts.Progress drawn with progressbar, created
// once the expected total is worth a bar.
type transferBar struct {
	w     io.Writer
	what  string
	mu    sync.Mutex
	total int64
	moved int64
	bar   *progressbar.ProgressBar
}

func (t *transferBar) Expect(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += n
	switch {
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
	if t.bar != nil {
		t.bar.Add64(n)
	}
}

func (t *transferBar) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar != nil {
		t.bar.Finish()
	}
}
