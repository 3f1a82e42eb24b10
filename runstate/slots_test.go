package runstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
)

// TestLiveSlots: on a real redis-server, the task slots of the workers
// serving a class add up while their heartbeat is in the window; a
// worker that stops removes its own, and one that died stops counting
// once its heartbeat is older than the window.
func TestLiveSlots(t *testing.T) {
	rdb := realRedis(t)
	ctx := context.Background()
	now := time.Now()
	class, other := "gpu.slots-test", "cpu.slots-test"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runstate.RegisterSlots(ctx, rdb, "host-a/1/x", []string{class, other}, 4, now))
	must(runstate.RegisterSlots(ctx, rdb, "host-b/2/y", []string{class}, 2, now))
	must(runstate.RegisterSlots(ctx, rdb, "host-c/3/z", []string{class}, 8, now.Add(-10*time.Minute))) // died
	since := now.Add(-90 * time.Second)
	for _, tc := range []struct {
		name  string
		class string
		want  int
		after func()
	}{
		{"two live workers of the class, not the dead one", class, 6, nil},
		{"a worker counts for each class it serves", other, 4, nil},
		{"a stopped worker no longer counts", class, 2, func() { must(runstate.UnregisterSlots(ctx, rdb, "host-a/1/x", []string{class, other}, 4)) }},
		{"a class nobody serves", "gpu.none-test", 0, nil},
	} {
		if tc.after != nil {
			tc.after()
		}
		got, err := runstate.LiveSlots(ctx, rdb, tc.class, since)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d slots (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}
