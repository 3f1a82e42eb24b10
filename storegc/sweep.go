package storegc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// The sweep: deleting what Collect planned, each removed run's objects
// in the order orderForDelete gave, then the unmarked blobs, each looked
// at once more.

// Sweep deletes what the plan found: each removed run's objects (state.json
// last), then the unmarked blobs. Before a blob goes it is looked at once
// more: one written again since the collection (a retry re-uploading the
// same bytes) is young and stays. It returns how many objects and bytes it
// removed.
func (p *Plan) Sweep(ctx context.Context, s artifacts.Store, o Options) (n int, bytes int64, err error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	for _, r := range p.Runs {
		for _, obj := range r.Objects {
			if err := s.Delete(ctx, obj.Key); err != nil {
				return n, bytes, fmt.Errorf("delete %s: %w", obj.Key, err)
			}
			n, bytes = n+1, bytes+obj.Size
		}
	}
	cutoff := now().Add(-o.Grace)
	for _, b := range p.Blobs {
		info, err := s.Stat(ctx, b.Key)
		if errors.Is(err, artifacts.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, bytes, fmt.Errorf("stat %s: %w", b.Key, err)
		}
		if !info.ModTime.Before(cutoff) {
			continue
		}
		if err := s.Delete(ctx, b.Key); err != nil {
			return n, bytes, fmt.Errorf("delete %s: %w", b.Key, err)
		}
		n, bytes = n+1, bytes+b.Size
	}
	return n, bytes, nil
}
