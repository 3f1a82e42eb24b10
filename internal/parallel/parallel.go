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
