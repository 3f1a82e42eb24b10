package runstate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func testRuns(t *testing.T) *Runs {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return NewRuns(rdb)
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
