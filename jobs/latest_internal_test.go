package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// slowGets widens the window between moveLatest's read and its write, as
// a slow S3 does.
type slowGets struct{ artifacts.Store }

func (s slowGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(10 * time.Millisecond)
	return s.Store.Get(ctx, key)
}

func testRuns(t *testing.T) *runstate.Runs {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return runstate.NewRuns(rdb)
}

// Runs of one model and platform finalizing at once: latest.json ends at
// the newest submission, whatever order the finalizes run in.
func TestConcurrentFinalizesLeaveTheNewestLatest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	local, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := slowGets{local}
	runs := testRuns(t)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The newest run starts its finalize first, so without the lock
			// older ones read before it writes and then write over it.
			time.Sleep(time.Duration(n-i) * time.Millisecond)
			errs[i] = moveLatest(ctx, runs, store, state.Latest{
				Format: state.LatestFormat, Model: "m", Platform: "p", Run: fmt.Sprintf("run-%d", i),
				SubmittedAt: base.Add(time.Duration(i) * time.Minute),
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var got state.Latest
	if err := artifacts.GetJSON(ctx, store, artifacts.LatestKey("m", "p"), &got); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("run-%d", n-1); got.Run != want {
		t.Fatalf("latest.json names %s, want the newest submission %s", got.Run, want)
	}
}
