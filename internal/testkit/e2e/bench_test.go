package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// nGraphBundle is a bundle of n graph specs, each an MLP in→hidden→in.
func nGraphBundle(b *testing.B, n, in, hidden int, seed uint64) string {
	b.Helper()
	dir := b.TempDir()
	model := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(in, hidden, in).Write(model); err != nil {
		b.Fatal(err)
	}
	one := filepath.Join(dir, "one")
	if _, err := bundlegen.FromONNX(context.Background(), model, one, bundlegen.ONNXOptions{
		Ranges: []string{fmt.Sprintf("input:1x%d..8x%d", in, in)}, Samples: 1, Seed: seed, IntHi: 9, Reference: ort.New(ort.Options{}), WorkDir: b.TempDir(),
	}); err != nil {
		b.Fatal(err)
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = one
	}
	out := filepath.Join(dir, "bundle")
	if _, err := bundlegen.Merge(parts, out, "bench.Graphs"); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkQueueVsDirect divides the end-to-end time of N graph tasks
// through the queue (real redis-server, two in-process workers, a local
// store: upload, enqueue, tune, upload engines, finalize) by the time of the
// same backend work done directly in one process with the same concurrency
// (as many goroutines calling tuner.TuneGraph as there are workers).
// Target ≤ 1.10. Workers stay up across rounds, as a fleet's do, and every
// round tunes a new bundle, so that nothing is reused. With two workers on
// a two-core machine, one worker's transfers and hashing land in the other's
// CPU measurements, which then need longer to turn stable; the one-worker
// case shows the queue's own cost without that.
func BenchmarkQueueVsDirect(b *testing.B) {
	orttest.Need(b)
	// Every size × workers on the file store; on S3 the small ones (a
	// medium row costs a minute of make bench, and the store's share of a
	// task is largest where the task is smallest).
	for _, tc := range []struct {
		name       string
		in, hidden int
		workers    int
		store      string
	}{{"small", 32, 64, 2, "file"}, {"small", 32, 64, 1, "file"}, {"medium", 256, 4096, 2, "file"}, {"medium", 256, 4096, 1, "file"},
		{"small", 32, 64, 2, "s3"}, {"small", 32, 64, 1, "s3"}} {
		b.Run(fmt.Sprintf("%s/%dworkers/%s", tc.name, tc.workers, tc.store), func(b *testing.B) {
			queueVsDirect(b, tc.name, tc.in, tc.hidden, tc.workers, tc.store)
		})
	}
}

func queueVsDirect(b *testing.B, name string, in, hidden, workers int, storeKind string) {
	const n = 8
	redisURL := testsvc.Redis(b)
	// One bundle per round (different samples, so different work keys):
	// the result index must not turn later rounds into reuse.
	var buns []*bundle.Bundle
	for round := 0; round < 3; round++ {
		bun, err := bundle.Open(nGraphBundle(b, n, in, hidden, uint64(round+1)))
		if err != nil {
			b.Fatal(err)
		}
		buns = append(buns, bun)
	}
	strat, _ := strategy.Parse(strategy.MaxThroughput, 0)
	cands, _ := backend.ParseCandidates("ort:cpu:basic,ort:cpu:extended")
	reg := backend.Registry{"ort": ort.New(ort.Options{})}
	rule := backend.DefaultStopRule()
	rule.MaxTime = 200 * time.Millisecond

	direct := func(bun *bundle.Bundle) time.Duration {
		out := b.TempDir()
		start := time.Now()
		// Hashed once per bundle, as `worker tune` and submit do.
		digest, err := bun.Digest()
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		next := int64(-1)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(atomic.AddInt64(&next, 1))
					if i >= n {
						return
					}
					g := bun.Manifest.Graphs[i].Name
					if _, err := tuner.TuneGraph(context.Background(), bun, g, filepath.Join(out, g), tuner.Options{
						Backends: reg, Strategy: strat, Candidates: cands, StopRule: rule, BundleDigest: digest,
					}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}

	// The queue side: two workers that stay up across rounds, as a
	// fleet's do (their start-up is not the queue's cost per run), and a
	// new run per round.
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, redisURL)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	var store artifacts.Store
	if storeKind == "s3" {
		store, err = artifacts.NewS3(testsvc.StartS3(b).Bucket(b))
	} else {
		store, err = artifacts.NewLocal(b.TempDir())
	}
	if err != nil {
		b.Fatal(err)
	}
	queue := fmt.Sprintf("bench-%s-%d", name, time.Now().UnixNano())
	for w := 0; w < workers; w++ {
		wk, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: reg, Queues: []string{queue}, Concurrency: 1, WorkDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := wk.Start(); err != nil {
			b.Fatal(err)
		}
		defer wk.Shutdown()
	}
	c := jobs.NewClient(rdb, store)
	defer c.Close()
	queued := func(round int) time.Duration {
		start := time.Now()
		sub, err := c.Submit(ctx, buns[round], jobs.SubmitOptions{Target: queue, Strategy: strat, Candidates: cands, Backends: reg, BenchTime: rule.MaxTime, Force: true})
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
					b.Fatalf("run %+v", st)
				}
				// The end is when finalize recorded it, not when this
				// loop noticed: the loop polls as gently as `submit
				// --wait` does, since a tight poll of Redis is CPU taken
				// from the workers' measurements on a small machine.
				return st.FinishedAt.Sub(start)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	var ratios []float64
	var dSum, qSum time.Duration
	for round := 0; round < 3; round++ {
		d := direct(buns[round])
		q := queued(round)
		dSum += d
		qSum += q
		ratios = append(ratios, float64(q)/float64(d))
	}
	r := median(ratios)
	b.ReportMetric(r, "queue/direct")
	fmt.Printf("queue vs direct, %d %s graph tasks (%.0f ms each), %d worker(s), %s store: mean %.0f ms / %.0f ms, median ratio %.3f (target ≤ 1.10, met: %s)\n",
		n, name, float64(workers)*float64(dSum.Milliseconds())/3/n, workers, storeKind, float64(qSum.Milliseconds())/3, float64(dSum.Milliseconds())/3, r,
		map[bool]string{true: "yes", false: "NO"}[r <= 1.10])
}

// BenchmarkHandlerThroughput compares raw queue throughput of our tune:graph
// handler (payload decoding and the Redis bookkeeping check, on tasks whose
// graph is already finished, so no engine is built) with asynq running an
// empty handler, on the same redis-server and server settings.
func BenchmarkHandlerThroughput(b *testing.B) {
	const m = 2000
	redisURL := testsvc.Redis(b)
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, redisURL)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	store, err := artifacts.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// A run whose one graph is already finished.
	runs := runstate.NewRuns(rdb)
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if _, err := runs.Create(ctx, run, "bench", "cpu", []string{"0"}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := runs.CompleteGraph(ctx, run, "0", runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
		b.Fatal(err)
	}
	payload, _ := json.Marshal(jobs.GraphPayload{V: jobs.PayloadVersion, Run: run, Graph: "0", WorkKey: "x"})

	measure := func(queue string, h asynq.Handler, done *int64) float64 {
		q := asynq.NewClientFromRedisClient(rdb)
		defer q.Close()
		for i := 0; i < m; i++ {
			if _, err := q.Enqueue(asynq.NewTask(jobs.TypeGraph, payload), asynq.Queue(queue)); err != nil {
				b.Fatal(err)
			}
		}
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 10, Queues: map[string]int{queue: 1}, LogLevel: asynq.ErrorLevel})
		start := time.Now()
		if err := srv.Start(h); err != nil {
			b.Fatal(err)
		}
		for atomic.LoadInt64(done) < m {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		srv.Shutdown()
		return m / el.Seconds()
	}
	var emptyDone, oursDone int64
	empty := measure(fmt.Sprintf("bench-empty-%d", time.Now().UnixNano()), asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		atomic.AddInt64(&emptyDone, 1)
		return nil
	}), &emptyDone)
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: backend.Registry{}, Queues: []string{"cpu"}})
	if err != nil {
		b.Fatal(err)
	}
	ours := measure(fmt.Sprintf("bench-ours-%d", time.Now().UnixNano()), asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := w.ProcessGraph(ctx, t)
		atomic.AddInt64(&oursDone, 1)
		return err
	}), &oursDone)
	b.ReportMetric(ours/empty, "ours/empty")
	fmt.Printf("queue throughput, %d tasks, concurrency 10: our tune:graph handler %.0f tasks/s, empty handler %.0f tasks/s, ratio %.2f (target ≥ 0.90, met: %s)\n",
		m, ours, empty, ours/empty, map[bool]string{true: "yes", false: "NO"}[ours/empty >= 0.9])
}

func median(xs []float64) float64 {
	s := append([]float64{}, xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
