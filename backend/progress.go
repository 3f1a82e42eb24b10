package backend

import "context"

// CallProgress hears how many timed calls a benchmark has measured so far
// at one batch size, so that a long measurement (a stop rule may run for
// seconds per batch size) can show it is moving. It travels in the context
// rather than in Engine.Benchmark's signature, because only a display wants
// it and every backend would otherwise carry a parameter most callers leave
// nil. It may be called from another goroutine than the benchmark's.
type CallProgress func(calls int)

type callProgressKey struct{}

// WithCallProgress returns a context whose benchmarks (Measure, and the
// backends that measure in a child process) report their timed calls to p.
func WithCallProgress(ctx context.Context, p CallProgress) context.Context {
	return context.WithValue(ctx, callProgressKey{}, p)
}

// CallProgressFrom is the context's CallProgress, or nil.
func CallProgressFrom(ctx context.Context) CallProgress {
	p, _ := ctx.Value(callProgressKey{}).(CallProgress)
	return p
}
