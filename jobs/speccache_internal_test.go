package jobs

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
)

type countingStore struct {
	artifacts.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// A run's tasks read its run.json once per worker, however many there are
// and however many run at once; a missing run.json is permanent and a
// failed read is not remembered.
func TestSpecCacheReadsARunOnce(t *testing.T) {
	t.Parallel()
	local, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: local}
	ctx := context.Background()
	if err := artifacts.PutJSON(ctx, store, artifacts.RunKey("r1"), RunSpec{Run: "r1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	c := newSpecCache(store, 2)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, err := c.get(ctx, "r1"); err != nil || s.Model != "m" {
				t.Errorf("get: %+v %v", s, err)
			}
		}()
	}
	wg.Wait()
	if n := store.gets.Load(); n != 1 {
		t.Fatalf("%d reads of run.json for 16 tasks, want 1", n)
	}
	if _, err := c.get(ctx, "missing"); !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("a missing run.json: %v, want a permanent error", err)
	}
	if err := artifacts.PutJSON(ctx, store, artifacts.RunKey("missing"), RunSpec{Run: "missing"}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.get(ctx, "missing"); err != nil || s.Run != "missing" {
		t.Fatalf("a run.json written since: %+v %v", s, err)
	}
	// Bounded: a third run evicts the oldest, which is read again.
	if err := artifacts.PutJSON(ctx, store, artifacts.RunKey("r2"), RunSpec{Run: "r2"}); err != nil {
		t.Fatal(err)
	}
	c.get(ctx, "r2")
	before := store.gets.Load()
	if _, err := c.get(ctx, "r1"); err != nil || store.gets.Load() != before+1 {
		t.Fatalf("r1 should have been evicted by a third run (reads %d → %d)", before, store.gets.Load())
	}
}
