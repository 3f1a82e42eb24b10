package artifacts

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// DefaultPutConcurrency is how many files PutFiles uploads at once: a
// bundle's files are mostly small, so round trips, not bandwidth, bound a
// sequential upload; 16 in flight keep a server busy without flooding it.
const DefaultPutConcurrency = 16

// FileBlob is a file to store as the blob Ref, whose digest the caller
// computed already (PutFileAs).
type FileBlob struct {
	Path string
	Ref  Ref
}

// PutFiles stores each file as its blob (PutFileAs: skipped when the store
// holds the blob already, verified when it is uploaded), at most limit at a
// time (limit < 1: DefaultPutConcurrency). The first failure cancels the
// uploads still running and is returned, naming its file; no upload is left
// half-visible, since each is atomic. The context's Progress expects the
// total size first.
func PutFiles(ctx context.Context, s Store, files []FileBlob, limit int) error {
	if limit < 1 {
		limit = DefaultPutConcurrency
	}
	var total int64
	for _, f := range files {
		total += f.Ref.Size
	}
	progressFrom(ctx).Expect(total)

	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for _, f := range files {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("upload: %w", err) // an earlier one failed, or the caller gave up
			}
			if _, err := PutFileAs(ctx, s, f.Path, f.Ref); err != nil {
				return fmt.Errorf("upload %s: %w", f.Path, err)
			}
			return nil
		})
	}
	return g.Wait()
}
