package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/hooktest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// TestDeadlineWatchWarnsOnceWhenTheNightFallsBehind: `nightly --wait`
// re-checks a night planned to fit before its deadline against the
// workers live now (real redis-server); when a worker is gone and what is
// left no longer fits, it warns on stderr and posts the webhook (a real
// HTTP receiver) once, however many producers follow the night; a night
// still on plan says nothing.
func TestDeadlineWatchWarnsOnceWhenTheNightFallsBehind(t *testing.T) {
	ctx := context.Background()
	opts, _ := redis.ParseURL(testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	hookURL, bodies := hooktest.Receiver(t)

	t0 := time.Now()
	deadline, planned := t0.Add(2*time.Hour).UTC(), t0.Add(90*time.Minute).UTC()
	plan := &state.Plan{Nightly: "late-1", Notify: hookURL, Entries: []state.PlanEntry{
		{Model: "a", Target: "gpu.x", Run: "ra", Estimates: []state.GraphEstimate{{Graph: "0", Seconds: 3600}, {Graph: "1", Seconds: 1800}, {Graph: "2", Seconds: 1800}}},
	}, Estimate: &state.PlanEstimate{Deadline: &deadline, ExpectedFinish: &planned, Classes: []state.ClassEstimate{
		{Class: "gpu.x", LongestSeconds: 3600, Workers: 2, WorkersFrom: state.WorkersRegistered}}}}
	pending := runstate.GraphStatus{Status: runstate.GraphPending}
	runs := map[string]runstate.RunStatus{"ra": {Run: "ra", Status: runstate.RunRunning,
		Graphs: map[string]runstate.GraphStatus{"0": pending, "1": pending, "2": pending}}}
	watch := func(errOut io.Writer, at *time.Time) *deadlineWatch {
		w := newDeadlineWatch(morningReport{rdb: rdb}, errOut)
		w.now = func() time.Time { return *at }
		return w
	}
	slots := func(n int, when time.Time) {
		runstate.UnregisterSlots(ctx, rdb, "w1", []string{"gpu.x"}, 1)
		runstate.UnregisterSlots(ctx, rdb, "w2", []string{"gpu.x"}, 1)
		for _, w := range []string{"w1", "w2"}[:n] {
			if err := runstate.RegisterSlots(ctx, rdb, w, []string{"gpu.x"}, 1, when); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Two workers live: on plan, nothing said at any check.
	at := t0
	slots(2, at)
	var onPlan bytes.Buffer
	w := watch(&onPlan, &at)
	for range 3 { // heartbeats every check, as live workers beat
		slots(2, at)
		w.Progress(ctx, plan, runs)
		at = at.Add(lateCheckEvery)
	}
	if onPlan.Len() != 0 || len(bodies()) != 0 {
		t.Fatalf("a night on plan warned: %q, webhook %q", onPlan.String(), bodies())
	}

	// One worker lost ten minutes in: two producers follow the night.
	at = t0.Add(10 * time.Minute)
	slots(1, at)
	var out1, out2 bytes.Buffer
	w1, w2 := watch(&out1, &at), watch(&out2, &at)
	for range 3 {
		slots(1, at)
		w1.Progress(ctx, plan, runs)
		w2.Progress(ctx, plan, runs)
		at = at.Add(lateCheckEvery)
	}
	said := out1.String() + out2.String()
	if strings.Count(said, "warning: ") != 1 || !strings.Contains(said, "nightly late-1 has fallen behind") ||
		!strings.Contains(said, "gpu.x: 1 worker(s), 2 would fit (3 graph(s) left, 2h00m)") {
		t.Errorf("stderr of the two producers %q: want one warning naming gpu.x short of a worker", said)
	}
	if b := bodies(); len(b) != 1 || !strings.Contains(b[0], "has fallen behind") {
		t.Errorf("webhook bodies %q: want one warning", b)
	}
}
