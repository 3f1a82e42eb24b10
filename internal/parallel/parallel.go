package parallel

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// ForEach calls fn(ctx, 0..n-1), at most limit at once, and returns the
// first error; after one, the calls running see their context cancelled
// and those not yet started are skipped.
func ForEach(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(limit, 1))
	for i := range n {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fn(ctx, i)
		})
	}
	return g.Wait()
}

// Ordered calls fetch(ctx, 0..n-1), at most limit at once, a window of
// calls at a time (the next window's while use works through this one),
// and use(i, v) with each value in the order of i, one call at a time: a
// loop over many objects that reads them in parallel, hands them over in
// order, and holds at most three windows of them. It returns the first
// error of either; the fetches still running see their context cancelled
// and have returned when Ordered does.
func Ordered[T any](ctx context.Context, n, limit, window int, fetch func(ctx context.Context, i int) (T, error), use func(i int, v T) error) error {
	window = max(window, 1)
	ctx, cancel := context.WithCancel(ctx)
	type batch struct {
		start int
		vs    []T
		err   error
	}
	batches := make(chan batch, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(batches)
		for start := 0; start < n; start += window {
			vs := make([]T, min(window, n-start))
			err := ForEach(ctx, len(vs), limit, func(ctx context.Context, j int) error {
				v, err := fetch(ctx, start+j)
				vs[j] = v
				return err
			})
			select {
			case batches <- batch{start, vs, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	err := func() error {
		for b := range batches {
			if b.err != nil {
				return b.err
			}
			for j, v := range b.vs {
				if err := use(b.start+j, v); err != nil {
					return err
				}
			}
		}
		return ctx.Err() // the caller's: the fetching stopped early
	}()
	cancel()
	<-done
	return err
}
