package parallel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/internal/parallel"
)

func TestForEach(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		n, limit  int
		failAt    int // -1: none
		wantErr   error
		wantCalls func(calls int) bool
	}{
		{"all run", 20, 4, -1, nil, func(c int) bool { return c == 20 }},
		{"limit 0 is one at a time", 5, 0, -1, nil, func(c int) bool { return c == 5 }},
		{"none", 0, 4, -1, nil, func(c int) bool { return c == 0 }},
		// One at a time: the failing call is the third, and nothing after it starts.
		{"stops at the first error", 10, 1, 2, boom, func(c int) bool { return c == 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls, running, most atomic.Int32
			err := parallel.ForEach(context.Background(), tc.n, tc.limit, func(ctx context.Context, i int) error {
				calls.Add(1)
				now := running.Add(1)
				defer running.Add(-1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				if i == tc.failAt {
					return boom
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !tc.wantCalls(int(calls.Load())) {
				t.Errorf("%d calls", calls.Load())
			}
			if m := int(most.Load()); m > max(tc.limit, 1) {
				t.Errorf("%d calls at once, limit %d", m, tc.limit)
			}
		})
	}
}
