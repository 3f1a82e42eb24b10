package artifacts

import "context"

// Progress hears how many bytes of a transfer have moved, so that a
// command can draw a progress bar for a long upload or download without
// this package depending on a bar library. Its methods may be called from
// several goroutines at once.
type Progress interface {
	// Expect says that n more bytes are to move (a transfer's size, known
	// when it starts): a bar's total grows by n.
	Expect(n int64)
	// Moved says that n more bytes have moved. A blob found already
	// stored, or a file already in place, counts as moved in one step
	// (unless the Progress is a Skipper); a retried request's bytes count
	// once.
	Moved(n int64)
}

// Skipper is a Progress that wants to tell bytes found already in place (a
// blob the store has, a file already downloaded) from bytes that moved. A
// Progress without it hears them as Moved, so that a bar reaches its end;
// one with it (a worker's byte counter) hears them as Skipped instead.
type Skipper interface {
	Skipped(n int64)
}

type progressKey struct{}

// WithProgress returns a context whose transfers (PutFile, PutFileAs,
// PutFiles, FetchFile, Fetch) report their bytes to p. It travels in the
// context, not as a parameter, because transfers happen deep inside callers
// (jobs.Client.Submit) that have no reason to know about a terminal.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// progressFrom is the context's Progress, or one that ignores everything.
func progressFrom(ctx context.Context) Progress {
	if p, ok := ctx.Value(progressKey{}).(Progress); ok && p != nil {
		return p
	}
	return noProgress{}
}

// reportSkipped reports n bytes found in place to the context's Progress.
func reportSkipped(ctx context.Context, n int64) {
	if n <= 0 {
		return
	}
	p := progressFrom(ctx)
	if s, ok := p.(Skipper); ok {
		s.Skipped(n)
		return
	}
	p.Moved(n)
}

type noProgress struct{}

func (noProgress) Expect(int64) {}
func (noProgress) Moved(int64)  {}
