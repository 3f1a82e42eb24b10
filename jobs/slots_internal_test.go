package jobs

import (
	"context"
	"errors"
	"testing"
	"time"
)

// taken reports the slot a goroutine's take got, once it gets one.
func takeAsync(p *slotPool, ctx context.Context, platform string, limit int) chan slot {
	got := make(chan slot, 1)
	go func() {
		s, err := p.take(ctx, platform, limit)
		if err == nil {
			got <- s
		}
		close(got)
	}()
	return got
}

// notYet fails if ch delivers within a moment. It can only fail when take
// is wrong: nothing it waits for is due.
func notYet(t *testing.T, ch chan slot, what string) {
	t.Helper()
	select {
	case s, ok := <-ch:
		t.Fatalf("%s: got %+v (%v) before any slot of its platform came back", what, s, ok)
	case <-time.After(50 * time.Millisecond):
	}
}

// waitFor waits until n tasks wait for platform.
func waitFor(p *slotPool, platform string, n int) {
	for {
		p.mu.Lock()
		w := p.waiting[platform]
		p.mu.Unlock()
		if w == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSlotPoolTakesTheWantedPlatform(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newSlotPool([]slot{{platform: "a"}, {platform: "b"}})
	b, err := p.take(ctx, "b", 1)
	if err != nil || b.platform != "b" {
		t.Fatalf("take(b) = %+v, %v", b, err)
	}
	// No b is free: a task that wants b waits, even though a is free.
	got := takeAsync(p, ctx, "b", 1)
	waitFor(p, "b", 1)
	a, err := p.take(ctx, "", 1)
	if err != nil || a.platform != "a" {
		t.Fatalf("take(any) = %+v, %v", a, err)
	}
	p.put(a)
	notYet(t, got, "the task that wants b")
	// As many wait for b as may: the next one does not wait.
	if s, err := p.take(ctx, "b", 1); !errors.Is(err, errSlotsBusy) {
		t.Fatalf("a second task waiting for b: %+v, %v; want errSlotsBusy", s, err)
	}
	p.put(b)
	if s := <-got; s.platform != "b" {
		t.Fatalf("the waiting task took %+v, want b", s)
	}
	// Waiting ends with the context, and counts no more.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.take(cctx, "b", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("take on a cancelled context: %v", err)
	}
	if p.waiting["b"] != 0 {
		t.Fatalf("%d still counted as waiting for b", p.waiting["b"])
	}
}

// A task that takes any slot leaves a returned slot to the task waiting
// for its platform, and takes it once that task has given up.
func TestSlotPoolLeavesSlotsToTheirWaiters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newSlotPool([]slot{{platform: "a"}, {platform: "b"}})
	a, _ := p.take(ctx, "a", 1)
	b, _ := p.take(ctx, "b", 1)
	wctx, giveUp := context.WithCancel(ctx)
	forA := takeAsync(p, wctx, "a", 1)
	waitFor(p, "a", 1)
	forAny := takeAsync(p, ctx, "", 1)
	waitFor(p, "", 1)
	p.put(a)
	if s := <-forA; s.platform != "a" {
		t.Fatalf("the task waiting for a took %+v", s)
	}
	notYet(t, forAny, "the task that takes any")
	// Another task waits for a; a comes back, then that task gives up: the
	// task that takes any must not sleep beside a free slot.
	forA2 := takeAsync(p, wctx, "a", 1)
	waitFor(p, "a", 1)
	p.put(a)
	s, ok := <-forA2
	if ok {
		p.put(s) // it got a after all; give it back
	}
	giveUp()
	if s := <-forAny; s.platform != "a" {
		t.Fatalf("the task that takes any took %+v, want a", s)
	}
	p.put(b)
}

// A task that has to wait for a slot says so once, before it waits (a
// prefetched task reports it waits); one that finds a slot free says
// nothing. full tells a task taken now that it is ahead of a slot.
func TestTakeSaysItWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newSlotPool([]slot{{platform: "a"}})
	said := 0
	s, err := p.takeOr(ctx, "a", 1, func() { said++ })
	if err != nil || said != 0 || !p.full("a") || !p.full("") {
		t.Fatalf("a free slot: %v, said %d times it waits, full %v: want it taken at once, silently, and the pool full", err, said, p.full("a"))
	}
	waited := make(chan int, 1)
	got := make(chan error, 1)
	go func() {
		_, err := p.takeOr(ctx, "a", 1, func() { waited <- 1 })
		got <- err
	}()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("a task waiting for the busy slot did not say so")
	}
	p.put(s)
	if err := <-got; err != nil {
		t.Fatalf("the waiting task did not get the slot back: %v", err)
	}
	if len(waited) != 0 {
		t.Error("the task said more than once that it waits")
	}
}
