package runstate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

func realRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// `producer runs` reads a page from the index that fits its filter, newest
// first, and pages back with Before.
func TestListPagesThroughTheIndexes(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	for i := range 6 {
		model := []string{"a", "b"}[i%2]
		run := fmt.Sprintf("%s-run%d", model, i)
		if _, err := runs.Create(ctx, run, model, "cpu", []string{"0"}); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if _, err := runs.Finish(ctx, run, []string{runstate.RunDone, runstate.RunFailed}[i%4/2], "", ""); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	ids := func(list []runstate.RunStatus) string {
		s := ""
		for _, r := range list {
			s += r.Run + " "
		}
		return s
	}
	for _, c := range []struct {
		o    runstate.ListOptions
		want string
	}{
		{runstate.ListOptions{}, "b-run5 a-run4 b-run3 a-run2 b-run1 a-run0 "},
		{runstate.ListOptions{Limit: 2}, "b-run5 a-run4 "},
		{runstate.ListOptions{Model: "a"}, "a-run4 a-run2 a-run0 "},
		{runstate.ListOptions{Status: runstate.RunRunning}, "b-run5 a-run4 "},
		{runstate.ListOptions{Status: runstate.RunDone}, "b-run1 a-run0 "},
		{runstate.ListOptions{Status: runstate.RunFailed, Model: "b"}, "b-run3 "},
	} {
		got, err := runs.List(ctx, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != c.want {
			t.Errorf("List(%+v) = %q, want %q", c.o, ids(got), c.want)
		}
	}
	page, _ := runs.List(ctx, runstate.ListOptions{Limit: 4})
	next, err := runs.List(ctx, runstate.ListOptions{Limit: 4, Before: page[len(page)-1].CreatedAt})
	if err != nil || ids(next) != "b-run1 a-run0 " {
		t.Fatalf("second page %q %v", ids(next), err)
	}
}

// roundTrips counts what a client sends: each command alone, and each
// pipeline once.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// A page of `runs` costs the same few round trips whatever its size: the
// records of its runs (each a hash and its graphs) are read in one
// pipeline, and read whole.
func TestListReadsAPageInOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t).(*redis.Client)
	runs := runstate.NewRuns(rdb)
	const model = "pipelined-list"
	for i := range 12 {
		run := fmt.Sprintf("%s-%02d", model, i)
		if _, err := runs.Create(ctx, run, model, "cpu", []string{"0", "1"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runs.CompleteGraph(ctx, run, "1", runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
			t.Fatal(err)
		}
	}
	h := &roundTrips{}
	rdb.AddHook(h)
	trips := map[int]int64{}
	for _, limit := range []int{2, 10} {
		before := h.n.Load()
		list, err := runs.List(ctx, runstate.ListOptions{Model: model, Limit: limit})
		if err != nil || len(list) != limit {
			t.Fatalf("List(limit %d): %d runs, %v", limit, len(list), err)
		}
		trips[limit] = h.n.Load() - before
		for _, st := range list {
			want, err := runs.Get(ctx, st.Run)
			if err != nil || st.Model != model || len(st.Graphs) != 2 || st.Graphs["1"].Status != want.Graphs["1"].Status || st.Done != want.Done {
				t.Errorf("listed %+v, Get reads %+v (%v)", st, want, err)
			}
		}
	}
	if trips[10] != trips[2] {
		t.Errorf("a page of 2 runs took %d round trips, one of 10 took %d: want the same", trips[2], trips[10])
	}
}

// On a Redis Cluster the runs of a page lie in different slots (each run's
// keys are tagged with its id): List reads them all, wherever they are.
func TestListOnACluster(t *testing.T) {
	ctx := context.Background()
	c := testsvc.OwnRedisCluster(t)
	rdb, err := runstate.ConnectRedis(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	runs := runstate.NewRuns(rdb)
	masters := map[string]bool{}
	var want []string
	for i := range 12 {
		run := fmt.Sprintf("spread-%02d", i)
		if _, err := runs.Create(ctx, run, "spread", "cpu", []string{"0"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runs.CompleteGraph(ctx, run, "0", runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
			t.Fatal(err)
		}
		s, err := c.ShardOf(ctx, "tunefleet:run:{"+run+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[s.Master] = true
		want = append([]string{run}, want...)
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	if len(masters) < 2 {
		t.Fatalf("the runs' keys lie on %d master(s): the test needs them spread", len(masters))
	}
	// By class too, its listings built once from the runs listed before
	// them (reads and writes across the masters).
	for _, k := range []string{"tunefleet:runs:target:{cpu}", "tunefleet:runs:target:{cpu}:status:running", "tunefleet:runs:targets-indexed"} {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []runstate.ListOptions{{Model: "spread"}, {ModelLike: "sprea"}, {Model: "spread", Limit: 5}, {Target: "cpu"}, {Target: "cpu", Limit: 5}} {
		list, err := runs.List(ctx, o)
		if err != nil {
			t.Fatalf("List(%+v): %v", o, err)
		}
		var got []string
		for _, st := range list {
			got = append(got, st.Run)
			if st.Graphs["0"].Status != runstate.GraphDone {
				t.Errorf("List(%+v): run %s read without its graphs: %+v", o, st.Run, st.Graphs)
			}
		}
		n := len(want)
		if o.Limit > 0 {
			n = o.Limit
		}
		if !slices.Equal(got, want[:n]) {
			t.Errorf("List(%+v) = %v, want %v", o, got, want[:n])
		}
	}
}

// A finished run's bookkeeping leaves Redis after the retention; the
// running ones stay, and the indexes forget the expired runs.
func TestFinishedRunsExpireAfterTheRetention(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t)
	runs := runstate.NewRuns(rdb)
	runs.Retention = time.Second
	graphs := []string{"0", "1", "2"}
	for i := range 20 {
		run := fmt.Sprintf("m-%d", i)
		if _, err := runs.Create(ctx, run, "m", "cpu", graphs); err != nil {
			t.Fatal(err)
		}
		n, _ := runs.StartAttempt(ctx, run, "0", "w")
		runs.BeginTuning(ctx, run, "0", n)
		runs.EndTuning(ctx, run, "0", n)
		for _, g := range graphs {
			runs.CompleteGraph(ctx, run, g, runstate.GraphStatus{Status: runstate.GraphDone})
		}
		if i > 0 { // m-0 keeps running
			if _, err := runs.Finish(ctx, run, runstate.RunDone, "", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(2500 * time.Millisecond)
	keys, err := rdb.Keys(ctx, "tunefleet:run:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k[:len("tunefleet:run:{m-0}")] != "tunefleet:run:{m-0}" {
			t.Errorf("key %s of a finished run outlived the retention", k)
		}
	}
	list, err := runs.List(ctx, runstate.ListOptions{Model: "m"})
	if err != nil || len(list) != 1 || list[0].Run != "m-0" {
		t.Fatalf("runs listed after the retention: %v %v", list, err)
	}
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs:model:{m}").Result(); n != 1 {
		t.Fatalf("the model index kept %d entries, want the running run only", n)
	}
}

// `runs --model M --status S` reads M's listing for S, kept in step as runs
// are created, fail, are cancelled, finish and pass the retention; every
// listing of a model is in the model's hash slot. Each case reads the
// listing both through List and directly, so an index holding extra
// entries (which List would only skip) is caught. The class's listings
// (`runs --target T --status S`) are checked alike.
func TestModelStatusIndexFollowsTheRuns(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t)
	runs := runstate.NewRuns(rdb)
	runs.Retention = 2 * time.Second
	model := fmt.Sprintf("msi-%d", time.Now().UnixNano())
	// The model's only class: its listings and the class's hold the same runs.
	target := "class-" + model
	keys := map[string]func(string) string{
		"model":  func(status string) string { return "tunefleet:runs:model:{" + model + "}:status:" + status },
		"target": func(status string) string { return "tunefleet:runs:target:{" + target + "}:status:" + status },
	}
	create := func(run string) {
		t.Helper()
		if _, err := runs.Create(ctx, run, model, target, []string{"0", "1"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	finish := func(run, status string) {
		t.Helper()
		if _, err := runs.Finish(ctx, run, status, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want map[string]string) {
		t.Helper()
		for kind, key := range keys {
			for _, status := range []string{runstate.RunRunning, runstate.RunDone, runstate.RunFailed, runstate.RunCancelled} {
				o := runstate.ListOptions{Model: model, Status: status}
				if kind == "target" {
					o = runstate.ListOptions{Target: target, Status: status}
				}
				got, err := runs.List(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				listed := ""
				for _, r := range got {
					listed += r.Run + " "
				}
				raw, err := rdb.ZRevRange(ctx, key(status), 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				indexed := ""
				for _, r := range raw {
					indexed += r + " "
				}
				if listed != want[status] || indexed != want[status] {
					t.Errorf("%s: --%s --status %s lists %q, its index holds %q, want %q", when, kind, status, listed, indexed, want[status])
				}
			}
		}
	}

	create("r0")
	create("r1")
	create("r2")
	create("r3")
	check("created", map[string]string{runstate.RunRunning: "r3 r2 r1 r0 "})

	// r1 fails: one graph failed, the run finalized failed.
	runs.CompleteGraph(ctx, "r1", "0", runstate.GraphStatus{Status: runstate.GraphFailed})
	runs.CompleteGraph(ctx, "r1", "1", runstate.GraphStatus{Status: runstate.GraphDone})
	finish("r1", runstate.RunFailed)
	// r2 is cancelled: its pending graphs end, then its finalize.
	if _, _, err := runs.Cancel(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	finish("r2", runstate.RunCancelled)
	// r3 is done; a repeated finalize changes nothing.
	finish("r3", runstate.RunDone)
	finish("r3", runstate.RunDone)
	check("after fail, cancel, done", map[string]string{
		runstate.RunRunning: "r0 ", runstate.RunFailed: "r1 ", runstate.RunCancelled: "r2 ", runstate.RunDone: "r3 "})

	// Past the retention, the next run to end trims every listing of the
	// model (by creation time, as the global listing is), not only its
	// own status's; the running listing is the reconciler's and stays.
	time.Sleep(runs.Retention + 500*time.Millisecond)
	create("r4")
	finish("r4", runstate.RunFailed)
	check("past the retention", map[string]string{runstate.RunRunning: "r0 ", runstate.RunFailed: "r4 "})
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs:model:{"+model+"}").Result(); n != 1 {
		t.Errorf("the model's listing holds %d runs past the retention, want 1 (r4)", n)
	}
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs:target:{"+target+"}").Result(); n != 1 {
		t.Errorf("the class's listing holds %d runs past the retention, want 1 (r4)", n)
	}
}

// A listing written under the pre-hash-tag key is moved into the model's
// listings (by status) the first time the model is listed.
func TestLegacyModelListingIsMoved(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t)
	runs := runstate.NewRuns(rdb)
	model := fmt.Sprintf("legacy-%d", time.Now().UnixNano())
	for i, status := range []string{runstate.RunDone, runstate.RunFailed, ""} {
		run := fmt.Sprintf("%s-%d", model, i)
		if _, err := runs.Create(ctx, run, model, "cpu", []string{"0"}); err != nil {
			t.Fatal(err)
		}
		if status != "" {
			if _, err := runs.Finish(ctx, run, status, "", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What an older tunefleet wrote: one listing per model, no hash tag.
	zs, _ := rdb.ZRangeWithScores(ctx, "tunefleet:runs:model:{"+model+"}", 0, -1).Result()
	rdb.Del(ctx, "tunefleet:runs:model:{"+model+"}", "tunefleet:runs:model:{"+model+"}:status:done",
		"tunefleet:runs:model:{"+model+"}:status:failed", "tunefleet:runs:model:{"+model+"}:status:running")
	rdb.ZAdd(ctx, "tunefleet:runs:model:"+model, zs...)
	rdb.ZAdd(ctx, "tunefleet:runs:model:"+model, redis.Z{Score: 1, Member: "expired-run"})

	got, err := runs.List(ctx, runstate.ListOptions{Model: model, Status: runstate.RunFailed})
	if err != nil || len(got) != 1 || got[0].Run != model+"-1" {
		t.Fatalf("failed runs of the moved listing: %v %v", got, err)
	}
	if all, _ := runs.List(ctx, runstate.ListOptions{Model: model}); len(all) != 3 {
		t.Errorf("the moved listing lists %d runs, want 3", len(all))
	}
	if n, _ := rdb.Exists(ctx, "tunefleet:runs:model:"+model).Result(); n != 0 {
		t.Error("the legacy listing is still there after the move")
	}
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs:model:{"+model+"}:status:running").Result(); n != 1 {
		t.Errorf("the running listing holds %d runs, want 1", n)
	}
}

// A run of more graphs than one batch of the create script records each
// graph pending, once.
func TestCreateRecordsManyGraphs(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	var graphs []string
	for i := range 1234 {
		graphs = append(graphs, fmt.Sprint(i))
	}
	run := fmt.Sprintf("many-%d", time.Now().UnixNano())
	if ok, err := runs.Create(ctx, run, "many", "cpu", graphs); err != nil || !ok {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	if n, err := runs.PendingCount(ctx, run); err != nil || n != int64(len(graphs)) {
		t.Fatalf("%d graphs pending (%v), want %d", n, err, len(graphs))
	}
	st, err := runs.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Graphs) != len(graphs) || st.Graphs["1233"].Status != runstate.GraphPending || st.Total != len(graphs) {
		t.Fatalf("run record: %d graphs, total %d, graph 1233 %+v", len(st.Graphs), st.Total, st.Graphs["1233"])
	}
}

// A model filter that is a model's whole name lists exactly that model
// (from its index); any other pattern is a substring, or with ^ a prefix.
func TestModelFilterExactOrLike(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	base := fmt.Sprintf("mf%d", time.Now().UnixNano())
	for i, model := range []string{base, base + "_model", "x" + base} {
		if _, err := runs.Create(ctx, fmt.Sprintf("%s-run-%d", base, i), model, "cpu", []string{"0"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ pattern, want string }{
		{base, base}, // a whole name: exactly that model
		{base[:len(base)-1], base + "," + base + "_model,x" + base}, // a part: every model holding it
		{"^" + base, base + "," + base + "_model"},                  // a prefix
		{base + "_model", base + "_model"},
		{"^nosuch" + base, ""},
	} {
		got, err := runs.List(ctx, runstate.ListOptions{ModelLike: tc.pattern})
		if err != nil {
			t.Fatal(err)
		}
		var models []string
		for _, r := range got {
			models = append(models, r.Model)
		}
		slices.Sort(models)
		if strings.Join(models, ",") != tc.want {
			t.Errorf("--model %q lists %v, want %s", tc.pattern, models, tc.want)
		}
	}
}

// A search by a name no model has, or by part of names, reads the names of
// the models with runs, never the history: its round trips are the same
// with 10 runs and with 60, and it finds nothing without reading a run.
func TestListByUnknownModelIsIndependentOfHistory(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t).(*redis.Client)
	runs := runstate.NewRuns(rdb)
	model := fmt.Sprintf("hist%d", time.Now().UnixNano())
	h := &roundTrips{}
	rdb.AddHook(h)
	trips := func(pattern string) (int64, int) {
		before := h.n.Load()
		list, err := runs.List(ctx, runstate.ListOptions{ModelLike: pattern, Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		return h.n.Load() - before, len(list)
	}
	create := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := runs.Create(ctx, fmt.Sprintf("%s-%03d", model, i), model, "cpu", []string{"0"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(0, 10)
	unknown10, n := trips("nosuch" + model)
	part10, parts := trips(model[:len(model)-2])
	if n != 0 || parts != 10 {
		t.Fatalf("with 10 runs: %d for an unknown name (want 0), %d by part of the name (want 10)", n, parts)
	}
	create(10, 60)
	unknown60, n := trips("nosuch" + model)
	part60, parts := trips(model[:len(model)-2])
	if n != 0 || parts != 20 {
		t.Fatalf("with 60 runs: %d for an unknown name (want 0), %d by part of the name (want the page of 20)", n, parts)
	}
	if unknown60 != unknown10 || part60 != part10 {
		t.Errorf("round trips with 10 runs: %d (unknown name), %d (part of a name); with 60: %d, %d: want the same", unknown10, part10, unknown60, part60)
	}
	names, err := runs.Models(ctx)
	if err != nil || !slices.Contains(names, model) {
		t.Errorf("Models lists %d names without %s (%v)", len(names), model, err)
	}
}

// Runs listed before the target listings existed are added to them the
// first time a target is listed, once.
func TestTargetListingsAreBuiltOnce(t *testing.T) {
	ctx := context.Background()
	rdb := realRedis(t)
	runs := runstate.NewRuns(rdb)
	target := fmt.Sprintf("legacy-%d", time.Now().UnixNano())
	for i := range 3 {
		if _, err := runs.Create(ctx, fmt.Sprintf("%s-r%d", target, i), "m-"+target, target, []string{"0"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := runs.Finish(ctx, target+"-r0", runstate.RunDone, "", ""); err != nil {
		t.Fatal(err)
	}
	// As an older producer left them: no target listings, no mark.
	for _, k := range []string{"", ":status:running", ":status:done"} {
		rdb.Del(ctx, "tunefleet:runs:target:{"+target+"}"+k)
	}
	rdb.Del(ctx, "tunefleet:runs:targets-indexed")
	for _, c := range []struct {
		status, want string
	}{
		{"", target + "-r2 " + target + "-r1 " + target + "-r0 "},
		{runstate.RunRunning, target + "-r2 " + target + "-r1 "},
		{runstate.RunDone, target + "-r0 "},
	} {
		got, err := runs.List(ctx, runstate.ListOptions{Target: target, Status: c.status})
		if err != nil {
			t.Fatal(err)
		}
		listed := ""
		for _, r := range got {
			listed += r.Run + " "
		}
		if listed != c.want {
			t.Errorf("--target --status %q lists %q, want %q", c.status, listed, c.want)
		}
	}
	if n, _ := rdb.Exists(ctx, "tunefleet:runs:targets-indexed").Result(); n != 1 {
		t.Error("no mark after the target listings were built")
	}
}
