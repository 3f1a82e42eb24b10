package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Sizes of BenchmarkFinalizeScale: runs of finalizeSmall and of 10× as
// many graphs; heapGrowthTarget is the most the heap in use may grow from
// the small run to the large (2.5 times for ten times the graphs: 0.25 a
// graph), liveTarget the most live heap a graph more may cost.
const (
	finalizeSmall    = 1000
	finalizeLarge    = 10 * finalizeSmall
	heapGrowthTarget = 2.5
	liveTarget       = 2048.0 // bytes of live heap a graph
)

// BenchmarkFinalizeScale measures a worker's finalize (tune:finalize: the
// graphs' results read back and published, state.json, report.html, the
// history entry and its head, latest.json) of a run of 1,000 graphs and
// of one of 10,000, on a real redis-server and a file store, three rounds
// of each, alternating. The run's graphs are completed as workers
// complete them: each an attempt's result.json (the result of a real ONNX
// Runtime tuning of one small graph, named after the graph) and
// runstate's CompleteGraph. It prints the time and the peak heap growth
// per graph at each size and their ratios, 10,000 ÷ 1,000: the time's
// target is ≤ 1.5 (no piece of finalize grows faster than the run), the
// heap's ≤ 0.25 (bounded: the heap grows less than 2.5 times for ten
// times the graphs; a finalize that holds every graph's result, state and
// report grows ten times, 1.0). A third row is the live heap (what the
// collections during the finalize found live, without the garbage the
// collector lets pile up): its growth from the small run to the large,
// per graph more, is what finalize holds of a graph (target ≤ 2 KiB).
//
// FINALIZE_SCALE_LARGE changes the large size (e.g. 100000),
// FINALIZE_SCALE_ROUNDS the rounds (a verdict needs three),
// FINALIZE_SCALE_STORE keeps the store in that directory, and
// FINALIZE_SCALE_HEAPPROFILE writes there the heap profile of the large
// finalize at its peak of live heap (it collects every few milliseconds
// to find it: its times are not comparable).
func BenchmarkFinalizeScale(b *testing.B) {
	orttest.Need(b)
	ctx := context.Background()
	large := finalizeLarge
	if v, err := strconv.Atoi(os.Getenv("FINALIZE_SCALE_LARGE")); err == nil && v > finalizeSmall {
		large = v
	}
	opts, err := redis.ParseURL(testsvc.OwnRedis(b, testsvc.RedisOptions{}).URL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	storeDir := b.TempDir()
	if d := os.Getenv("FINALIZE_SCALE_STORE"); d != "" {
		storeDir = d
	}
	store, err := artifacts.NewLocal(storeDir)
	if err != nil {
		b.Fatal(err)
	}
	reg := backend.Registry{"ort": ort.New(ort.Options{})}
	s, err := strategy.Parse("max-throughput", 0)
	if err != nil {
		b.Fatal(err)
	}
	cands, err := backend.ParseCandidates("ort:cpu:basic")
	if err != nil {
		b.Fatal(err)
	}
	o := jobs.SubmitOptions{Target: "cpu", Strategy: s, Candidates: cands, Backends: reg, BenchTime: 20 * time.Millisecond}
	c := jobs.NewClient(rdb, store)
	defer c.Close()
	runs := runstate.NewRuns(rdb)

	// One graph tuned for real by a worker: its result is every graph's.
	one := filepath.Join(b.TempDir(), "one")
	onnx := filepath.Join(b.TempDir(), "g.onnx")
	if err := onnxtest.MLP(4, 8, 3).Write(onnx); err != nil {
		b.Fatal(err)
	}
	if _, err := bundlegen.FromONNX(ctx, onnx, one, bundlegen.ONNXOptions{Ranges: []string{"input:1x4..8x4"}, Samples: 1, Seed: 1,
		Reference: ort.New(ort.Options{}), WorkDir: b.TempDir(), Model: "scale.Model"}); err != nil {
		b.Fatal(err)
	}
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: reg, Queues: []string{"cpu"}, Concurrency: 1, WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	sub, err := c.Submit(ctx, openB(b, one), o)
	if err != nil {
		b.Fatal(err)
	}
	if st := waitFinal(b, runs, sub.Run); st.Status != runstate.RunDone {
		b.Fatalf("the tuned run: %s", st.Status)
	}
	w.Shutdown()
	var r0 tuner.Result
	if err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(sub.Run, "0"), &r0); err != nil {
		b.Fatal(err)
	}

	// A bundle of n graphs, each the tuned graph's files and declaration.
	bundles := map[int]*bundle.Bundle{}
	for _, n := range []int{finalizeSmall, large} {
		dir := filepath.Join(b.TempDir(), "b")
		if err := os.CopyFS(dir, os.DirFS(one)); err != nil {
			b.Fatal(err)
		}
		bundletest.EditManifest(b, dir, func(m *bundle.Manifest) {
			g0 := m.Graphs[0]
			m.Graphs = nil
			for i := range n {
				g := g0
				g.Name = strconv.Itoa(i)
				m.Graphs = append(m.Graphs, g)
			}
		})
		bundles[n] = openB(b, dir)
	}
	fw, err := jobs.NewWorker(jobs.WorkerConfig{Redis: rdb, Store: store, Backends: reg, Queues: []string{"cpu"}, Concurrency: 1, WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	// finalize submits a run of n graphs (held: no task is queued),
	// completes every graph from an attempt's result, and times its
	// finalize and the heap's growth during it.
	finalize := func(n int) (took, cpu time.Duration, heap heapGrowth) {
		ro := o
		ro.Hold, ro.Force = true, true
		sub, err := c.Submit(ctx, bundles[n], ro)
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			name := strconv.Itoa(i)
			r := r0
			r.Graph = name
			key := artifacts.GraphAttemptResultKey(sub.Run, name, 1)
			if err := artifacts.PutJSON(ctx, store, key, &r); err != nil {
				b.Fatal(err)
			}
			if _, _, err := runs.CompleteGraph(ctx, sub.Run, name, runstate.GraphStatus{Status: runstate.GraphDone, ResultKey: key}); err != nil {
				b.Fatal(err)
			}
		}
		payload, err := json.Marshal(jobs.FinalizePayload{V: jobs.PayloadVersion, Run: sub.Run})
		if err != nil {
			b.Fatal(err)
		}
		stop := heapPeak(os.Getenv("FINALIZE_SCALE_HEAPPROFILE"), n == large)
		cpu0 := cpuTime()
		began := time.Now()
		if err := fw.ProcessFinalize(ctx, asynq.NewTask(jobs.TypeFinalize, payload)); err != nil {
			b.Fatal(err)
		}
		took = time.Since(began)
		cpu = cpuTime() - cpu0
		heap = stop()
		if st, err := runs.Get(ctx, sub.Run); err != nil || st.Status != runstate.RunDone {
			b.Fatalf("run of %d graphs: %s %v", n, st.Status, err)
		}
		return took, cpu, heap
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("FINALIZE_SCALE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var ts, tl []time.Duration
	var cs, cl []time.Duration
	var hs, hl, ls, ll []time.Duration // bytes, as durations for verdict.Scaling
	b.ResetTimer()
	for range b.N {
		for range rounds {
			t, c, h := finalize(finalizeSmall)
			ts, cs, hs, ls = append(ts, t), append(cs, c), append(hs, time.Duration(h.inuse)), append(ls, time.Duration(h.live))
			t, c, h = finalize(large)
			tl, cl, hl, ll = append(tl, t), append(cl, c), append(hl, time.Duration(h.inuse)), append(ll, time.Duration(h.live))
		}
	}
	b.StopTimer()
	small, big := fmt.Sprint(finalizeSmall, " graphs"), fmt.Sprint(large, " graphs")
	tr, tmet := verdict.Scaling(small, big, finalizeSmall, large, ts, tl, 1.5)
	// Bounded: the heap under heapGrowthTarget times for the graphs'
	// growth (0.25 a graph at 10,000 against 1,000).
	heapTarget := heapGrowthTarget * finalizeSmall / float64(large)
	hr, hmet := verdict.Scaling(small, big, finalizeSmall, large, hs, hl, heapTarget)
	perGraph := func(ds []time.Duration, n int) float64 { return float64(minOf(ds)) / float64(n) }
	b.ReportMetric(tr, "time-per-graph-ratio")
	b.ReportMetric(hr, "heap-per-graph-ratio")
	fmt.Printf("finalize of a run of %d and of %d graphs: %.0f µs and %.0f µs per graph (%.1f s for %d): %d ÷ %d = %.2f (target ≤ 1.5), met: %s; CPU time of this process (the finalize, the benchmark's heap sampling): %.0f µs and %.0f µs per graph\n",
		finalizeSmall, large, perGraph(ts, finalizeSmall)/1e3, perGraph(tl, large)/1e3, minOf(tl).Seconds(), large, large, finalizeSmall, tr, tmet, perGraph(cs, finalizeSmall)/1e3, perGraph(cl, large)/1e3)
	fmt.Printf("finalize of a run of %d and of %d graphs: peak heap growth %.1f KiB and %.1f KiB per graph (%.0f MiB for %d, %.0f MiB for %d): %d ÷ %d = %.2f (target ≤ %.2f: bounded, the heap under %.1f times for %.0f times the graphs), met: %s\n",
		finalizeSmall, large, perGraph(hs, finalizeSmall)/1024, perGraph(hl, large)/1024, float64(minOf(hs))/(1<<20), finalizeSmall, float64(minOf(hl))/(1<<20), large, large, finalizeSmall, hr, heapTarget, heapGrowthTarget, float64(large)/finalizeSmall, hmet)
	// What the finalize holds per graph: the live heap's growth from the
	// small run to the large, per graph more.
	largeN := large
	marginal := func(small, large time.Duration) float64 {
		return (float64(large) - float64(small)) / float64(largeN-finalizeSmall)
	}
	perLive := marginal(minOf(ls), minOf(ll))
	b.ReportMetric(perLive, "live-bytes-per-graph")
	lsSorted, llSorted := slices.Sorted(slices.Values(ls)), slices.Sorted(slices.Values(ll))
	why := ""
	if len(ls) < 3 {
		why = "fewer than three rounds a size"
	} else if hi, lo := marginal(lsSorted[0], llSorted[2]), marginal(lsSorted[2], llSorted[0]); (hi <= liveTarget) != (perLive <= liveTarget) || (lo <= liveTarget) != (perLive <= liveTarget) {
		why = fmt.Sprintf("the verdict changes within the rounds' spread (%.1f to %.1f KiB a graph)", lo/1024, hi/1024)
	}
	fmt.Printf("finalize of a run of %d and of %d graphs: peak live heap growth %.1f MiB and %.1f MiB: %.2f KiB per graph more (target ≤ %.0f KiB: what finalize holds of a graph), met: %s\n",
		finalizeSmall, large, float64(minOf(ls))/(1<<20), float64(minOf(ll))/(1<<20), perLive/1024, liveTarget/1024, verdict.Of(perLive <= liveTarget, why))
}

// heapGrowth is how far the heap grew during a finalize: inuse, the heap
// in use (what the process holds: live objects and the garbage not yet
// collected, which the collector lets grow to about the live heap before
// it runs), and live, the live heap as the collections during the
// finalize found it (what the finalize holds).
type heapGrowth struct{ inuse, live uint64 }

// heapPeak samples the heap every few milliseconds from now until stop,
// which returns its peak growth over what was there after a collection at
// the start. With profile set and take, it also collects at each sample and
// writes to profile the heap profile at the peak of live heap.
func heapPeak(profile string, take bool) (stop func() heapGrowth) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	base, peak := ms.HeapInuse, ms.HeapInuse
	baseLive, peakLive := live[0].Value.Uint64(), live[0].Value.Uint64()
	var profiled uint64
	var prof bytes.Buffer
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if profile != "" && take {
				runtime.GC()
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > profiled {
					profiled = m.HeapAlloc
					prof.Reset()
					pprof.WriteHeapProfile(&prof)
				}
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			metrics.Read(live)
			peakLive = max(peakLive, live[0].Value.Uint64())
		}
	}()
	return func() heapGrowth {
		close(done)
		wg.Wait()
		if prof.Len() > 0 {
			os.WriteFile(profile, prof.Bytes(), 0o644)
		}
		return heapGrowth{inuse: peak - base, live: peakLive - baseLive}
	}
}

// cpuTime is the CPU time this process has used (user and system), which
// a loaded machine stretches far less than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitFinal polls a run's record until it is final.
func waitFinal(tb testing.TB, runs *runstate.Runs, run string) runstate.RunStatus {
	tb.Helper()
	for {
		st, err := runs.Get(context.Background(), run)
		if err != nil {
			tb.Fatal(err)
		}
		if st.Final() {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func minOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func openB(tb testing.TB, dir string) *bundle.Bundle {
	tb.Helper()
	b, err := bundle.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
