package scalebench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// BenchmarkRedisRetention runs N one-graph runs (SCALEBENCH_RETENTION_RUNS,
// default 200; each reuses its graph, so a run costs its bookkeeping) with
// workers whose WorkerConfig.Retention is 2 s, waits past it, finishes one
// more run (indexes are trimmed when a run ends), and counts
// what Redis still holds: keys (all, and tunefleet's), run records and
// used_memory, against an empty server's. Before the retention lands
// (no such field), the same runs are measured without it, and the row
// says so. Target: no run record left, and memory back near the empty
// server's.
func BenchmarkRedisRetention(b *testing.B) {
	n := envInts("SCALEBENCH_RETENTION_RUNS", []int{200})[0]
	const retention = 2 * time.Second
	f := newFleet(b, "file")
	ctx := context.Background()
	empty := redisFigures(b, f.rdb)
	_, retained := f.startWorkers(workerOptions{Workers: 1, Concurrency: 2, Retention: retention})
	bun := repeatBundle(b, partBundle(b, 16, 32, 5), 1, "sb.retention")
	f.runOnce(bun, tinyTuning, 5*time.Minute) // cold: fills the index
	var runs []string
	for range n {
		run, _ := f.submit(bun, tinyTuning)
		runs = append(runs, run)
	}
	for _, run := range runs {
		if st := f.wait(run, 5*time.Minute); st.Status != runstate.RunDone {
			b.Fatalf("run %s ended %s", run, st.Status)
		}
	}
	done := redisFigures(b, f.rdb)
	time.Sleep(retention + 3*time.Second)
	// The run indexes (by time, model, status) are trimmed of entries past
	// retention whenever a run ends: one more run, as the next night's
	// would be, leaves what a fleet's Redis holds in steady state.
	f.runOnce(bun, tinyTuning, 5*time.Minute)
	// Keys with a TTL go when read or when Redis's active expiry samples
	// them; the figures are what an operator's INFO/DBSIZE would show.
	past := redisFigures(b, f.rdb)
	left := 0
	for _, run := range runs {
		if n, _ := f.rdb.Exists(ctx, "tunefleet:run:{"+run+"}").Result(); n > 0 {
			left++
		}
	}
	note := ""
	if !retained {
		note = " [no WorkerConfig.Retention: measured without retention]"
	}
	fmt.Printf("scalebench: redis empty %s; after %d runs %s; %v past retention %s; run records left %d%s\n",
		empty, n+1, done, retention, past, left, note)
	iter := f.rdb.Scan(ctx, 0, "tunefleet:*", 1000).Iterator()
	for shown := 0; shown < 10 && iter.Next(ctx); shown++ {
		k := iter.Val()
		typ, _ := f.rdb.Type(ctx, k).Result()
		sz, _ := f.rdb.MemoryUsage(ctx, k).Result()
		ttl, _ := f.rdb.TTL(ctx, k).Result()
		fmt.Printf("scalebench: left past retention: %s (%s, %d B, ttl %v)\n", k, typ, sz, ttl)
	}
	perRun := float64(past.oursBytes) / float64(n+1)
	indexed, _ := f.rdb.ZCard(ctx, "tunefleet:runs").Result()
	report(orderRedis, fmt.Sprintf("Redis after %d runs, %v past a %v retention, then one more run", n+1, 3*time.Second, retention),
		fmt.Sprintf("%d run records and %d index entries left; %d keys (%d tunefleet, %.0f B/run; before expiry %.0f B/run); used_memory %+.2f MiB over empty%s",
			left, indexed, past.keys, past.ours, perRun, float64(done.oursBytes)/float64(n+1), float64(past.used-empty.used)/(1<<20), note),
		"0 run records; tunefleet bytes < 64 B/run", ok(retained && left == 0 && perRun < 64))
}

// figures are what Redis holds.
type figures struct {
	keys, ours       int   // DBSIZE; keys under tunefleet:
	bytes, oursBytes int64 // MEMORY USAGE summed over those keys
	used             int64 // INFO memory used_memory (allocator-level, noisy)
}

func (f figures) String() string {
	return fmt.Sprintf("%d keys (%d tunefleet) holding %d B (%d B tunefleet), used_memory %.2f MiB",
		f.keys, f.ours, f.bytes, f.oursBytes, float64(f.used)/(1<<20))
}

func redisFigures(b *testing.B, rdb redis.UniversalClient) figures {
	b.Helper()
	ctx := context.Background()
	var f figures
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	f.keys = int(n)
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		sz, _ := rdb.MemoryUsage(ctx, k).Result()
		f.bytes += sz
		if strings.HasPrefix(k, "tunefleet:") {
			f.ours++
			f.oursBytes += sz
		}
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			f.used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return f
}

// BenchmarkRunsList times `producer runs --limit 10` (and with --model and
// --status filters) against a Redis holding 5,000 finished runs and one
// holding 50, alternately, median of 9 each. The runs are recorded through
// runstate.Runs (Create, CompleteGraph, Finish), as workers record them, so
// whatever index those keep is filled. Target: the ratio 5,000/50 ≤ 1.5.
func BenchmarkRunsList(b *testing.B) {
	sizes := []int{50, 5000}
	urls := make([]string, len(sizes))
	for i, n := range sizes {
		srv := testsvc.OwnRedis(b, testsvc.RedisOptions{})
		fillRuns(b, srv.URL, n)
		urls[i] = srv.URL
	}
	for _, args := range [][]string{{"runs", "--limit", "10"}, {"runs", "--limit", "10", "--model", "sb.m3", "--status", "done"}} {
		times := make([][]time.Duration, len(sizes))
		for range 9 {
			for i, u := range urls {
				start := time.Now()
				if code := cli.Execute(cli.NewProducer(), append(args, "--redis", u, "-o", "json"), io.Discard, io.Discard); code != 0 {
					b.Fatalf("producer %s: exit %d", strings.Join(args, " "), code)
				}
				times[i] = append(times[i], time.Since(start))
			}
		}
		lo, hi := medianDur(times[0]), medianDur(times[1])
		r := float64(hi) / float64(lo)
		report(orderRunsList, fmt.Sprintf("`producer %s`, %d vs %d runs", strings.Join(args, " "), sizes[1], sizes[0]),
			fmt.Sprintf("%.2f× (%v vs %v)", r, hi.Round(time.Microsecond), lo.Round(time.Microsecond)),
			"independent of history: ≤ 1.5×", ok(r <= 1.5))
	}
}

// fillRuns records n finished one-graph runs of five models, oldest first.
func fillRuns(b *testing.B, url string, n int) {
	b.Helper()
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	runs := runstate.NewRuns(rdb)
	for i := range n {
		run := fmt.Sprintf("sb.m%d-%06d", i%5, i)
		if _, err := runs.Create(ctx, run, fmt.Sprintf("sb.m%d", i%5), "cpu", []string{"0"}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := runs.CompleteGraph(ctx, run, "0", runstate.GraphStatus{Status: runstate.GraphDone, Winner: "ort:cpu:basic"}); err != nil {
			b.Fatal(err)
		}
		if _, err := runs.Finish(ctx, run, runstate.RunDone, "", "runs/"+run+"/state.json"); err != nil {
			b.Fatal(err)
		}
	}
}
