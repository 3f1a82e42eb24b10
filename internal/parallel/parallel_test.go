package parallel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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

// Ordered hands every value over in order whatever order the fetches end
// in, never more than limit fetches at once nor more than three windows
// ahead of use, and stops at the first error of either side.
func TestOrdered(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name               string
		n, limit, window   int
		fetchFail, useFail int // -1: none
		wantErr            error
		wantUsed           int
	}{
		{"all, in order", 100, 4, 7, -1, -1, nil, 100},
		{"window of one", 10, 3, 1, -1, -1, nil, 10},
		{"window 0 is one", 5, 2, 0, -1, -1, nil, 5},
		{"none", 0, 4, 8, -1, -1, nil, 0},
		{"a fetch fails: what came before it is used", 50, 4, 10, 23, -1, boom, 20},
		{"use fails", 50, 4, 10, -1, 31, boom, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running, most, ahead, usedN atomic.Int32
			used := 0 // use's own; usedN for the fetches to read
			err := parallel.Ordered(context.Background(), tc.n, tc.limit, tc.window,
				func(ctx context.Context, i int) (int, error) {
					now := running.Add(1)
					defer running.Add(-1)
					for {
						m := most.Load()
						if now <= m || most.CompareAndSwap(m, now) {
							break
						}
					}
					if a := int32(i) - usedN.Load(); a > ahead.Load() {
						ahead.Store(a)
					}
					time.Sleep(time.Duration((i*7)%5) * 100 * time.Microsecond) // out of order
					if i == tc.fetchFail {
						return 0, boom
					}
					return i * i, nil
				},
				func(i, v int) error {
					if i != used || v != i*i {
						t.Errorf("use(%d, %d) after %d values, want use(%d, %d)", i, v, used, used, used*used)
					}
					if i == tc.useFail {
						return boom
					}
					used++
					usedN.Store(int32(used))
					return nil
				})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if used != tc.wantUsed {
				t.Errorf("%d values used, want %d", used, tc.wantUsed)
			}
			if m := most.Load(); m > int32(max(tc.limit, 1)) {
				t.Errorf("%d fetches at once, limit %d", m, tc.limit)
			}
			if a := ahead.Load(); a >= int32(3*max(tc.window, 1)) {
				t.Errorf("a fetch %d values ahead of use, window %d", a, tc.window)
			}
		})
	}
}

// Ordered stops when its context is cancelled, with the context's error.
func TestOrderedCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := parallel.Ordered(ctx, 1000, 2, 4, func(ctx context.Context, i int) (int, error) { return i, nil },
		func(i, v int) error {
			if i == 10 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}
