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
	"github.com/tunefleet/tunefleet/state"
)

// slowGets widens the window between moveLatest's read and its write, as
// a slow S3 does.
type slowGets struct{ artifacts.Store }

func (s slowGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(10 * time.Millisecond)
	return s.Store.Get(ctx, key)
}

func testRuns(t *testing.T) *Runs {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return NewRuns(rdb)
}

// Runs of one model and platform finalizing at once: latest.json ends at
// the newest submission, whatever order the finalizes run in.
func TestConcurrentFinalizesLeaveTheNewestLatest(t *testing.T) {
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

func TestLockedIsExclusiveAndReleasedOnError(t *testing.T) {
	ctx := context.Background()
	runs := testRuns(t)
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs.Locked(ctx, "x", func(context.Context) error {
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				return errors.New("fn failed")
			})
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d holders at once, want 1", most)
	}
	// Every holder released it (its fn failing or not): it is free now.
	err := runs.Locked(ctx, "x", func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := runs.rdb.Exists(ctx, keyPrefix+"lock:x").Result(); n != 0 {
		t.Fatal("the lock key outlived its holder")
	}
}

// A holder whose lock expired (it stalled past the TTL) does not release
// the lock its successor now holds.
func TestExpiredHolderDoesNotReleaseItsSuccessor(t *testing.T) {
	ctx := context.Background()
	runs := testRuns(t)
	key := keyPrefix + "lock:y"
	err := runs.Locked(ctx, "y", func(context.Context) error {
		// The lock expires and another worker takes it.
		runs.rdb.Set(ctx, key, "successor", lockTTL)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := runs.rdb.Get(ctx, key).Result(); v != "successor" {
		t.Fatalf("lock value %q: the expired holder released its successor's lock", v)
	}
}
