package e2e_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// BenchmarkIdleWorkers measures what idle workers cost Redis and how soon
// they take a new run's first task, with the claim gate's quiet polling
// (--idle-poll 1s, woken by enqueues: the default) and without it
// (--idle-poll 25ms: every poll asks, as before), side by side on one
// redis-server of its own (INFO commandstats counts only this benchmark).
//
// Before the legs, redis-server alone for the window: its own CPU (its
// timers), which each leg's CPU figure leaves out. Per leg: eight workers (each with its own Redis clients and gate, as a
// process has) idle on a queue of their own; after 3 s of settling (the
// quiet at its longest), the commands of a 5 s window per worker and
// second; then three runs of one small graph, each submitted after 3 s of
// idleness, and the shortest queue wait of each run's task (enqueue to a
// worker's claim). Targets: the quiet leg's commands at most a tenth of
// the other's; its first task's wait within two poll intervals (50 ms) of
// the other's median (undecided when its rounds straddle that).
func BenchmarkIdleWorkers(b *testing.B) {
	orttest.Need(b)
	const workers = 8
	const window = 5 * time.Second
	srv := testsvc.OwnRedis(b, testsvc.RedisOptions{})
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	store, err := artifacts.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	bun, err := bundle.Open(nGraphBundle(b, 1, 16, 32, 7))
	if err != nil {
		b.Fatal(err)
	}
	reg := backend.Registry{"ort": ort.New(ort.Options{})}
	strat, _ := strategy.Parse(strategy.MaxThroughput, 0)
	cands, _ := backend.ParseCandidates("ort:cpu:basic")
	c := jobs.NewClient(rdb, store)
	defer c.Close()

	type leg struct {
		name     string
		idlePoll time.Duration
		perSec   float64
		cpuPerS  float64 // redis-server's CPU, µs a second per idle worker
		waits    []float64
	}
	// redis-server's own CPU with no client (its timers): taken off each
	// leg's, so that what is left is the workers'.
	cpu0 := redisCPU(b, rdb)
	time.Sleep(window)
	alone := float64(redisCPU(b, rdb)-cpu0) / float64(time.Microsecond) / window.Seconds()
	legs := []*leg{{name: "every poll asks (--idle-poll 25ms)", idlePoll: jobs.DefaultPollInterval}, {name: "quiet (--idle-poll 1s, woken by enqueues)", idlePoll: jobs.DefaultIdlePoll}}
	for i, l := range legs {
		queue := fmt.Sprintf("idle-%d-%d", i, time.Now().UnixNano()%1e9)
		pickup := &firstWait{}
		var started []*jobs.Worker
		for range workers {
			w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: reg, Queues: []string{queue}, Concurrency: 1,
				WorkDir: b.TempDir(), Log: io.Discard, IdlePoll: l.idlePoll, Observer: pickup})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			started = append(started, w)
		}
		time.Sleep(3 * time.Second)
		before, cpu0 := commandStats(b, rdb), redisCPU(b, rdb)
		time.Sleep(window)
		after, cpu1 := commandStats(b, rdb), redisCPU(b, rdb)
		l.cpuPerS = max(float64(cpu1-cpu0)/float64(time.Microsecond)/window.Seconds()-alone, 1) / workers
		var total int64
		for k, v := range after {
			if k != "info" {
				total += v - before[k]
			}
		}
		l.perSec = float64(total) / window.Seconds() / workers
		for round := range 3 {
			time.Sleep(3 * time.Second)
			pickup.reset()
			sub, err := c.Submit(ctx, bun, jobs.SubmitOptions{Target: queue, Strategy: strat, Candidates: cands, Backends: reg,
				BenchTime: 20 * time.Millisecond, Force: true})
			if err != nil {
				b.Fatal(err)
			}
			for {
				st, err := c.Runs().Get(ctx, sub.Run)
				if err != nil {
					b.Fatal(err)
				}
				if st.Final() {
					if st.Status != runstate.RunDone {
						b.Fatalf("round %d: run %+v", round, st)
					}
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			l.waits = append(l.waits, float64(pickup.get()))
		}
		for _, w := range started {
			w.Shutdown()
		}
		fmt.Printf("idle workers, %s: %.1f Redis commands and %.0f µs of redis-server CPU a second per idle worker, over the server's own %.0f µs a second (one master's core holds %.0f such workers); first task's wait %v (median of %d runs: %v)\n",
			l.name, l.perSec, l.cpuPerS, alone, 1e6/l.cpuPerS, time.Duration(median(l.waits)).Round(time.Millisecond), len(l.waits), durations(l.waits))
	}
	every, quiet := legs[0], legs[1]
	r := quiet.perSec / every.perSec
	b.ReportMetric(r, "quiet/every")
	costRow(fmt.Sprintf("Redis commands a second per idle worker, quiet ÷ every poll asks (%d idle workers, %v window)", workers, window),
		fmt.Sprintf("%.3f (%.1f vs %.1f)", r, quiet.perSec, every.perSec), "≤ 0.10", r <= 0.10)
	// Met when every quiet wait is within the margin of the other leg's
	// median, NO when even the shortest is past the other's longest plus
	// the margin; between the two the rounds cannot decide.
	const margin = 50 * time.Millisecond
	qw, ew := time.Duration(median(quiet.waits)), time.Duration(median(every.waits))
	qlo, qhi := time.Duration(slices.Min(quiet.waits)), time.Duration(slices.Max(quiet.waits))
	why := ""
	if qhi > ew+margin && qlo <= time.Duration(slices.Max(every.waits))+margin {
		why = "the quiet leg's rounds straddle the margin"
	}
	fmt.Printf("queue cost: a new run's first task's wait after 3 s idle, quiet vs every poll asks: %v vs %v, medians (target quiet ≤ every + %v, met: %s)\n",
		qw.Round(time.Millisecond), ew.Round(time.Millisecond), margin, verdict.Of(qhi <= ew+margin, why))
}

func durations(xs []float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x).Round(time.Millisecond)
	}
	return out
}
