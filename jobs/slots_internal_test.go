package jobs

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSlotPoolTakesTheWantedPlatform(t *testing.T) {
	ctx := context.Background()
	p := newSlotPool([]slot{{platform: "a"}, {platform: "b"}})
	b, err := p.take(ctx, "b")
	if err != nil || b.platform != "b" {
		t.Fatalf("take(b) = %+v, %v", b, err)
	}
	// No b is free: a task that wants b waits, even though a is free.
	got := make(chan slot)
	go func() {
		s, err := p.take(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	a, err := p.take(ctx, "")
	if err != nil || a.platform != "a" {
		t.Fatalf("take(any) = %+v, %v", a, err)
	}
	p.put(a)
	select {
	case s := <-got:
		t.Fatalf("the task that wants b took %+v when a came back", s)
	case <-time.After(50 * time.Millisecond):
	}
	p.put(b)
	if s := <-got; s.platform != "b" {
		t.Fatalf("the waiting task took %+v, want b", s)
	}
	// Waiting ends with the context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.take(cctx, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("take on a cancelled context: %v", err)
	}
}
