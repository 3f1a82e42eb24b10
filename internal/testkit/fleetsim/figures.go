// What a night left, read back and turned into figures: each graph's
// result, the queue's dispatch gaps, finalize's rate, the lower bound and
// the operator's views timed over the night's history.

package fleetsim

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend/replay"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/tuner"
)

// graphResult is what the simulator reads of a graph's result.json.
type graphResult struct {
	run    int
	worker string
	start  time.Time
	dur    time.Duration
}

// readResults reads every graph's published result.json, 16 at a time.
func readResults(tb testing.TB, store artifacts.Store, recs []runstate.RunStatus) []graphResult {
	tb.Helper()
	type job struct {
		run   int
		graph string
	}
	var jobs []job
	for i, r := range recs {
		for g := range r.Graphs {
			jobs = append(jobs, job{i, g})
		}
	}
	out := make([]graphResult, len(jobs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				raw, err := artifacts.ReadObject(context.Background(), store, artifacts.GraphResultKey(recs[j.run].Run, j.graph), artifacts.MaxJSONSize)
				var r tuner.Result
				if err == nil {
					err = json.Unmarshal(raw, &r)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("run %s graph %s: result.json: %w", recs[j.run].Run, j.graph, err))
					mu.Unlock()
					continue
				}
				out[i] = graphResult{run: j.run, worker: r.Worker, start: r.StartedAt, dur: r.Duration}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
	return out
}

// endHeap is a worker's slots, by when each became free.
type endHeap []time.Time

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *endHeap) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// dispatch measures, per task, how long it waited to start while a slot
// of the worker that took it was free (gaps, ms): the queue's own latency,
// which at a night's scale is hidden behind the wait for a free slot
// (waits, ms: from its run's creation to its start, information).
//
// Each worker process's tasks, in start order, take a slot not used yet
// while there is one, then the slot that became free first: a slot frees at its last task's end (the tuner's start plus
// duration, so the gap also holds the worker's own work around the tuner:
// downloads, uploads, bookkeeping), or, before its first task, when the
// run was created. The gap is the start less the later of that and the
// task's run's creation.
func dispatch(results []graphResult, recs []runstate.RunStatus, slots int) (gaps, waits []float64) {
	byWorker := map[string][]graphResult{}
	for _, r := range results {
		byWorker[r.worker] = append(byWorker[r.worker], r)
		waits = append(waits, ms(r.start.Sub(recs[r.run].CreatedAt)))
	}
	for _, rs := range byWorker {
		slices.SortFunc(rs, func(a, b graphResult) int { return a.start.Compare(b.start) })
		// The slots this worker used: as many as ran at once, at most.
		var h endHeap
		for _, r := range rs {
			created := recs[r.run].CreatedAt
			free := created // a slot not used yet: free since the run was
			if h.Len() >= slots {
				free = heap.Pop(&h).(time.Time)
				if free.Before(created) {
					free = created
				}
			}
			gaps = append(gaps, ms(max(r.start.Sub(free), 0)))
			heap.Push(&h, r.start.Add(r.dur))
		}
	}
	slices.Sort(gaps)
	slices.Sort(waits)
	return gaps, waits
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finalizeRate is the graphs finalized per second of finalize: each run's
// finalize took from its last graph's end to its record's finish. lo and
// hi bound it: the 2.5th and 97.5th percentiles of the same rate over the
// night's runs resampled with replacement (a bootstrap, seeded: the same
// night gives the same bounds). A target between them is one the night's
// own run-to-run spread cannot decide.
func finalizeRate(results []graphResult, recs []runstate.RunStatus) (rate, lo, hi float64, runs int) {
	lastEnd := make([]time.Time, len(recs))
	for _, r := range results {
		if e := r.start.Add(r.dur); e.After(lastEnd[r.run]) {
			lastEnd[r.run] = e
		}
	}
	type took struct {
		secs   float64
		graphs int
	}
	var each []took
	for i, r := range recs {
		if lastEnd[i].IsZero() || r.FinishedAt.Before(lastEnd[i]) {
			continue
		}
		each = append(each, took{r.FinishedAt.Sub(lastEnd[i]).Seconds(), r.Total})
	}
	rateOf := func(pick func(int) took) float64 {
		var secs float64
		graphs := 0
		for i := range each {
			t := pick(i)
			secs, graphs = secs+t.secs, graphs+t.graphs
		}
		if secs <= 0 {
			return 0
		}
		return float64(graphs) / secs
	}
	rate = rateOf(func(i int) took { return each[i] })
	if len(each) == 0 {
		return 0, 0, 0, 0
	}
	rng := rand.New(rand.NewPCG(35, uint64(len(each))))
	const resamples = 2000
	rates := make([]float64, resamples)
	for k := range rates {
		rates[k] = rateOf(func(int) took { return each[rng.IntN(len(each))] })
	}
	slices.Sort(rates)
	return rate, rates[resamples*25/1000], rates[resamples*975/1000-1], len(each)
}

// lowerBound is the night's shortest possible makespan: the simulated
// work, compressed, spread evenly over every slot, and never less than
// its longest graph.
func lowerBound(rc replay.Config, c Config, recs []runstate.RunStatus) time.Duration {
	var sum, longest time.Duration
	for _, r := range recs {
		for g := range r.Graphs {
			d := rc.Compressed(rc.Simulated(r.Model, g, Candidate))
			sum += d
			longest = max(longest, d)
		}
	}
	return max(sum/time.Duration(c.Workers()), longest)
}

type pageTime struct {
	name   string
	ms     float64
	lo, hi float64 // the fastest and the slowest of its rounds
	shows  float64 // how much the view shows; 0 for a view of a fixed size
}

// uiTimes starts `producer serve` over the night and times its pages and
// `producer runs` (medians of 3, after one warm-up each, with the fastest
// and slowest of the 3).
func uiTimes(tb testing.TB, svc *services, c Config, recs []runstate.RunStatus, nightly string) []pageTime {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := stack.StartProducerProcess(tb, svc.env, "serve", "--listen", addr, "--redis", svc.redisURL, "--store", svc.storeURL)
	defer srv.Kill()
	base := "http://" + addr
	stack.Poll(tb, c.Stall, "producer serve answering", func() (bool, string) {
		if srv.Exited() {
			tb.Fatalf("producer serve exited:\n%s", srv.Log())
		}
		resp, err := http.Get(base + "/fleet")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	// The largest run: its page lists the most graphs.
	big := recs[0]
	for _, r := range recs {
		if r.Total > big.Total {
			big = r
		}
	}
	pages := []struct {
		name, path string
		shows      float64
	}{
		{"UI: runs page", "/", 0}, // one page of runs
		{"UI: nightly page", "/nightly/" + nightly, float64(c.Graphs())},
		{"UI: fleet page", "/fleet", float64(c.Models)},
		{"UI: model page", "/models/" + big.Model, 0}, // one run of the model
		{"UI: run page (largest run)", "/runs/" + big.Run, float64(big.Total)},
	}
	var out []pageTime
	for _, p := range pages {
		var xs []float64
		for i := range 4 {
			start := time.Now()
			resp, err := http.Get(base + p.path)
			if err != nil {
				tb.Fatalf("GET %s: %v", p.path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				tb.Fatalf("GET %s: %s", p.path, resp.Status)
			}
			if i > 0 {
				xs = append(xs, ms(time.Since(start)))
			}
		}
		out = append(out, pageTime{p.name, median(xs), slices.Min(xs), slices.Max(xs), p.shows})
	}
	for _, cmd := range []struct {
		name string
		args []string
	}{
		{"`producer runs --limit 20`", []string{"runs", "--limit", "20"}},
		{"`producer runs --model M`", []string{"runs", "--model", big.Model, "--limit", "20"}},
	} {
		var xs []float64
		for i := range 4 {
			r := stack.RunProducer(tb, svc.env, append(cmd.args, "--redis", svc.redisURL, "--store", svc.storeURL)...)
			if r.Code != 0 {
				tb.Fatalf("producer %s: %s", strings.Join(cmd.args, " "), r)
			}
			if i > 0 {
				xs = append(xs, ms(r.Wall))
			}
		}
		out = append(out, pageTime{cmd.name, median(xs), slices.Min(xs), slices.Max(xs), 0})
	}
	return out
}
