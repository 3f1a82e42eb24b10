package runstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/runstate"
)

// Sizes of BenchmarkRunsListOverHistory.
const (
	listShallow = 500
	listDeep    = 10 * listShallow
	listModels  = 20
	listPage    = 25 // the web UI's runs list
	// listRare: one run in listRare is for the rare class.
	listRare = 10
	// listOld: the oldest listOld runs are for a class that has not run
	// since.
	listOld = 30
	// listRepeats is how many times a round lists each query.
	listRepeats = 10
)

// BenchmarkRunsListOverHistory measures `producer runs` and the web UI's
// runs list (runstate.List, a page of 25) on a real redis-server holding
// 500 runs of 20 models, and on one holding 5,000 (issue 35: listing
// queries independent of the history's length), each query in nine
// rounds alternating between the two: every run, by status, by model, by
// a part of many models' names, by a target class that few runs
// are for (one in 10), and by one whose runs are the oldest (a class
// retired since). It prints each query's time at both sizes and their ratio,
// 5,000 ÷ 500 runs (target ≤ 1.5: flat; a query that reads the history
// until a page is full bends).
func BenchmarkRunsListOverHistory(b *testing.B) {
	ctx := context.Background()
	shallow, deep := listFixture(b, listShallow), listFixture(b, listDeep)
	queries := []struct {
		name string
		o    runstate.ListOptions
	}{
		{"every run", runstate.ListOptions{}},
		{"--status failed", runstate.ListOptions{Status: runstate.RunFailed}},
		{"--model team3.m03", runstate.ListOptions{Model: "team3.m03"}},
		{"--model team3 (a part of 5 models' names)", runstate.ListOptions{ModelLike: "team3"}},
		{"--target gpu.rare", runstate.ListOptions{Target: "gpu.rare"}},
		{"--target gpu.rare --status done", runstate.ListOptions{Target: "gpu.rare", Status: runstate.RunDone}},
		{"--target gpu.old (the oldest 30 runs)", runstate.ListOptions{Target: "gpu.old"}},
	}
	type rounds struct{ s, d []time.Duration }
	got := make([]rounds, len(queries))
	// A round lists listRepeats times: one listing of a page takes a
	// fraction of a millisecond, which a moment's load on the machine
	// would decide.
	list := func(runs *runstate.Runs, o runstate.ListOptions) time.Duration {
		o.Limit = listPage
		began := time.Now()
		for range listRepeats {
			page, err := runs.List(ctx, o)
			if err != nil || len(page) != listPage {
				b.Fatalf("List(%+v): %d runs, %v", o, len(page), err)
			}
		}
		return time.Since(began) / listRepeats
	}
	b.ResetTimer()
	for range b.N {
		for range 9 {
			for i, q := range queries {
				got[i].s = append(got[i].s, list(shallow, q.o))
				got[i].d = append(got[i].d, list(deep, q.o))
			}
		}
	}
	b.StopTimer()
	for i, q := range queries {
		ratio, met := verdict.Scaling(fmt.Sprint(listShallow, " runs"), fmt.Sprint(listDeep, " runs"), 1, 1, got[i].s, got[i].d, 1.5)
		b.ReportMetric(ratio, fmt.Sprintf("q%d-deep/shallow", i))
		fmt.Printf("runs list, %s (a page of %d): %v over %d runs, %v over %d: %d ÷ %d runs = %.2f (target ≤ 1.5: flat), met: %s\n",
			q.name, listPage, minDur(got[i].s).Round(time.Microsecond), listShallow, minDur(got[i].d).Round(time.Microsecond), listDeep,
			listDeep, listShallow, ratio, met)
	}
}

// listFixture is a redis-server of its own holding n runs of listModels
// models (team<k>.m<j>, k = j mod 4), one in listRare for gpu.rare and the others
// for cpu, every tenth still running, the others done or (every
// seventh) failed.
func listFixture(b *testing.B, n int) *runstate.Runs {
	b.Helper()
	ctx := context.Background()
	runs := ownRuns(b)
	for i := range n {
		m := i % listModels
		model := fmt.Sprintf("team%d.m%02d", m%4, m)
		target := "cpu"
		switch {
		case i < listOld:
			target = "gpu.old" // a class that has not run since
		case i%listRare == 0:
			target = "gpu.rare"
		}
		run := fmt.Sprintf("%s-%06d", model, i)
		if _, err := runs.Create(ctx, run, model, target, []string{"0"}); err != nil {
			b.Fatal(err)
		}
		if i%10 == 9 {
			continue
		}
		status := runstate.RunDone
		if i%7 == 3 {
			status = runstate.RunFailed
		}
		if _, err := runs.Finish(ctx, run, status, "", ""); err != nil {
			b.Fatal(err)
		}
	}
	return runs
}

// ownRuns is a runstate.Runs on a redis-server of its own.
func ownRuns(b *testing.B) *runstate.Runs {
	b.Helper()
	opts, err := redis.ParseURL(testsvc.OwnRedis(b, testsvc.RedisOptions{}).URL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { rdb.Close() })
	return runstate.NewRuns(rdb)
}

func minDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}
