package jobs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// TestSubmitReuseFromSkipsBeforeEnqueue: with the registry's platforms, a
// run whose graphs are all indexed is completed and finalized by Submit
// itself, with no task queued, and still gets its own state and latest.json;
// that first finalize removes the scratch a dead producer left in the
// client's work directory.
func TestSubmitReuseFromSkipsBeforeEnqueue(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	rdb := env.e.Redis
	classes, err := runstate.KnownClasses(ctx, rdb)
	if err != nil || !slices.Equal(classes, []string{"cpu"}) {
		t.Fatalf("known classes %v, %v: the worker did not register", classes, err)
	}
	platforms, err := runstate.RecentPlatforms(ctx, rdb, "cpu", time.Now().Add(-time.Hour))
	if err != nil || len(platforms) != 1 {
		t.Fatalf("platforms serving cpu: %v, %v", platforms, err)
	}
	if none, _ := runstate.RecentPlatforms(ctx, rdb, "gpu.h100", time.Now().Add(-time.Hour)); len(none) != 0 {
		t.Fatalf("platforms serving gpu.h100: %v", none)
	}
	opts := submitOptions(t, strategy.MaxThroughput, "ort:cpu:basic")
	opts.ReuseFrom = platforms

	opts.Nightly = "night-1"
	cold, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cold.Enqueued != 3 || cold.Reused != 0 {
		t.Fatalf("cold night %+v: want 3 enqueued", cold)
	}
	if st := wait(t, env.client.Runs(), cold.Run); st.Status != runstate.RunDone {
		t.Fatalf("cold run %+v", st)
	}

	// The scratch a producer killed while finalizing left in the client's
	// work directory goes before its first finalize; a live process's stays.
	work := t.TempDir()
	env.client.SetWorkDir(work)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(work, fmt.Sprintf("tunefleet-task-%d-1", dead.Process.Pid))
	live := filepath.Join(work, fmt.Sprintf("tunefleet-task-%d-1", os.Getpid()))
	for _, d := range []string{orphan, live} {
		if err := os.MkdirAll(filepath.Join(d, "spool"), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	opts.Nightly = "night-2"
	warm, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); err == nil {
		t.Errorf("the inline finalize left a dead producer's scratch %s", orphan)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the inline finalize removed a live process's scratch: %v", err)
	}
	if warm.Run == cold.Run || !warm.Created || warm.Enqueued != 0 || warm.Reused != 3 {
		t.Fatalf("unchanged night %+v: want a new run with 3 reused, 0 enqueued", warm)
	}
	// Final when Submit returns: no worker was involved.
	st, err := env.client.Runs().Get(ctx, warm.Run)
	if err != nil || st.Status != runstate.RunDone || st.Finalizations != 1 || st.Platform != platforms[0] {
		t.Fatalf("unchanged run %+v, %v", st, err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, state := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListActiveTasks} {
		if tasks, _ := state("cpu"); len(tasks) != 0 {
			t.Fatalf("tasks queued for an unchanged run: %v", tasks)
		}
	}
	var ms state.State
	if err := artifacts.GetJSON(ctx, env.store, artifacts.StateKey(warm.Run), &ms); err != nil || ms.Status != runstate.RunDone || len(ms.Graphs) != 3 {
		t.Fatalf("state of the unchanged run: %+v, %v", ms, err)
	}
	var latest state.Latest
	if err := artifacts.GetJSON(ctx, env.store, artifacts.LatestKey("tests.ThreeGraphs", "cpu"), &latest); err != nil || latest.Run != warm.Run {
		t.Fatalf("latest.json %+v, %v: want it re-published by %s", latest, err, warm.Run)
	}
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(ctx, env.store, artifacts.RunKey(warm.Run), &spec); err != nil || spec.Nightly != "night-2" {
		t.Fatalf("run.json nightly %q, %v", spec.Nightly, err)
	}

	// Submitting the same night again is a no-op.
	again, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil || again.Run != warm.Run || again.Created || again.Enqueued != 0 || again.Reused != 0 {
		t.Fatalf("again %+v, %v", again, err)
	}
	// An indexed result whose engine is gone from the store is not skipped:
	// its graph goes to the worker, which drops the entry and tunes again.
	var indexed tuner.Result
	if err := artifacts.GetJSON(ctx, env.store, artifacts.ResultIndexKey(platforms[0], spec.WorkKeys["0"]), &indexed); err != nil {
		t.Fatal(err)
	}
	if err := env.store.Delete(ctx, artifacts.BlobKey(indexed.Winner.Engine.SHA256)); err != nil {
		t.Fatal(err)
	}
	opts.Nightly = "night-damaged"
	damaged, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil || damaged.Enqueued != 1 || damaged.Reused != 2 {
		t.Fatalf("with graph 0's engine gone %+v, %v: want it enqueued, the other two reused", damaged, err)
	}
	if st := wait(t, env.client.Runs(), damaged.Run); st.Status != runstate.RunDone || !strings.HasPrefix(st.Graphs["1"].Reason, "reused") || strings.HasPrefix(st.Graphs["0"].Reason, "reused") {
		t.Fatalf("run with a damaged index entry %+v", st)
	}
	// A platform that served the class but has none of the results: every
	// graph is enqueued, for the worker (which reuses what its own
	// platform has).
	opts.Nightly = "night-3"
	opts.ReuseFrom = append(slices.Clone(platforms), "cpu-elsewhere")
	slices.Sort(opts.ReuseFrom)
	mixed, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil || mixed.Enqueued != 3 || mixed.Reused != 0 {
		t.Fatalf("with a platform lacking results %+v, %v", mixed, err)
	}
	wait(t, env.client.Runs(), mixed.Run)
}
