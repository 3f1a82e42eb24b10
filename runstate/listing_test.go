package runstate_test

import (
	"context"
	"fmt"
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
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs:model:m").Result(); n != 1 {
		t.Fatalf("the model index kept %d entries, want the running run only", n)
	}
}
