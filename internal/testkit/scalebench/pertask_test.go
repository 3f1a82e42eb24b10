package scalebench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// Issue 9's rows, in order, for the summary.
const (
	orderRSS = iota
	orderSubmitS3
	orderSubmitS3Slow
	orderPerTaskFile
	orderPerTaskS3
	orderRunJSON
	orderRedis
	orderRunsList
	orderReuse
)

// BenchmarkPerTask is the per-task cost with tuning taken out: a bundle of
// N tiny graphs whose results are all in the result index, submitted with
// Force (a new run; every graph reused), timed from submit to finalize's
// record, divided by N. Measured at every N in one run, on a file store and
// on versitygw, with one in-process worker of two slots (and its default
// prefetch). The target is a flat cost per task: the marginal cost of a
// task between the two largest sizes at most 1.2× that between the two
// smallest (run time / N is printed too, but it falls with N whatever the
// code, as a run's fixed cost — asynq's poll, finalize — is shared by
// more tasks).
//
// The index is filled directly (one graph is tuned cold, and its indexed
// result is copied under every other graph's work key: they are the same
// model and samples), so a 2,000-graph run needs no 2,000 cold tunings.
//
// On versitygw it also counts what the tasks read: run.json GETs per task
// (the record every task decoded before the lead's per-worker cache), and
// times one fetch and decode of run.json at each N.
//
// SCALEBENCH_N (default 50,500,2000) and SCALEBENCH_REPS (default 3 for
// N ≤ 500, 1 above) change the sizes and rounds.
func BenchmarkPerTask(b *testing.B) {
	for _, kind := range []string{"file", "s3"} {
		b.Run(kind, func(b *testing.B) { perTask(b, kind) })
	}
}

// perTaskSample is one N's figures.
type perTaskSample struct {
	n            int
	perTask      time.Duration // median run time / N
	runJSONBytes int
	decode       time.Duration // one fetch+decode of run.json, median of 5
	runJSONGets  float64       // per task, S3 only
	reqPerTask   float64       // every S3 request per task
}

func perTask(b *testing.B, kind string) {
	ns := envInts("SCALEBENCH_N", []int{50, 500, 2000})
	f := newFleet(b, kind)
	part := partBundle(b, 16, 32, 7)

	// One cold tuning gives the result every graph reuses.
	stop, _ := f.startWorkers(workerOptions{Workers: 1, Concurrency: 2})
	cold, _ := f.runOnce(repeatBundle(b, part, 1, "sb.one"), tinyTuning, 5*time.Minute)
	stop()
	srcWK := f.workKeys(cold.Run)["0"]

	var samples []perTaskSample
	for _, n := range ns {
		bun := repeatBundle(b, part, n, fmt.Sprintf("sb.n%d", n))
		// Submitted while no worker serves the queue, so the index is full
		// before the first task is taken.
		first, _ := f.submit(bun, tinyTuning)
		f.fillIndex(first, cold.Platform, srcWK)
		stop, _ := f.startWorkers(workerOptions{Workers: 1, Concurrency: 2})
		limit := 2*time.Minute + time.Duration(n)*200*time.Millisecond
		if st := f.wait(first, limit); st.Status != runstate.RunDone {
			b.Fatalf("warm-up run %s ended %s: %s", first, st.Status, st.Reason)
		}
		reps := 3
		if n > 500 {
			reps = 1
		}
		reps = envInts("SCALEBENCH_REPS", []int{reps})[0]
		s := perTaskSample{n: n}
		var times []time.Duration
		if f.S3 != nil {
			f.S3.reset()
		}
		for range reps {
			st, d := f.runOnce(bun, tinyTuning, limit)
			if st.Done != n {
				b.Fatalf("run %s: %d of %d graphs done", st.Run, st.Done, n)
			}
			times = append(times, d)
		}
		if f.S3 != nil {
			c := f.S3.reset()
			s.runJSONGets = float64(c["GET run.json"]) / float64(n*reps)
			total := 0
			for _, v := range c {
				total += v
			}
			s.reqPerTask = float64(total) / float64(n*reps)
			fmt.Printf("scalebench: per-task %s N=%d requests per run: %s\n", kind, n, describeDiv(c, reps))
		}
		stop()
		s.perTask = medianDur(times) / time.Duration(n)
		s.runJSONBytes, s.decode = timeRunJSON(b, f.Store, first)
		fmt.Printf("scalebench: per-task %s N=%d: runs %v → %.2f ms/task; run.json %d KiB, fetch+decode %v\n",
			kind, n, roundAll(times), ms(s.perTask), s.runJSONBytes>>10, s.decode.Round(time.Microsecond))
		samples = append(samples, s)
	}

	var per []float64
	var cells []string
	for _, s := range samples {
		per = append(per, ms(s.perTask))
		cells = append(cells, fmt.Sprintf("%.1f", ms(s.perTask)))
	}
	r := spread(per)
	// A straight line through (N, run time): its slope is what one more
	// task costs, its intercept what a run costs whatever its size
	// (asynq's poll before the first task, finalize). Superlinear growth
	// shows as per-task figures that rise with N; a fixed cost, as figures
	// that fall.
	var xs, ys []float64
	for _, s := range samples {
		xs = append(xs, float64(s.n))
		ys = append(ys, ms(s.perTask)*float64(s.n))
	}
	slope, icept := fitLine(xs, ys)
	fmt.Printf("scalebench: per-task %s: fit run time = %.0f ms + %.2f ms × N\n", kind, icept, slope)
	// The marginal cost of a task between consecutive sizes, (T(N₂) −
	// T(N₁)) / (N₂ − N₁): a run's fixed cost cancels out, so the last
	// over the first says whether a task costs more in a bigger run.
	var marg []float64
	var mcells []string
	for i := 1; i < len(samples); i++ {
		m := (ys[i] - ys[i-1]) / (xs[i] - xs[i-1])
		marg = append(marg, m)
		mcells = append(mcells, fmt.Sprintf("%.1f", m))
	}
	growth := 1.0
	if len(marg) > 0 && marg[0] > 0 {
		growth = marg[len(marg)-1] / marg[0]
	}
	order := orderPerTaskFile
	if kind == "s3" {
		order = orderPerTaskS3
	}
	report(order, fmt.Sprintf("per task, tuning out, %s, N=%s", kind, joinInts(ns)),
		fmt.Sprintf("run/N %s ms (max/min %.2f); marginal %s ms/task (last/first %.2f); fit %.0f ms/run + %.2f ms/task",
			strings.Join(cells, " / "), r, strings.Join(mcells, " / "), growth, icept, slope),
		"flat: marginal last/first ≤ 1.20", ok(growth <= 1.2))

	if kind == "s3" {
		// What a task spends on run.json: the GETs it makes times one
		// fetch and decode (the figure that grew with N: 26 ms per task at
		// 1,000 graphs before the cache).
		var cells []string
		var worst float64
		for _, s := range samples {
			us := s.runJSONGets * float64(s.decode.Microseconds())
			worst = max(worst, us)
			cells = append(cells, fmt.Sprintf("%.0f", us))
			fmt.Printf("scalebench: run.json N=%d: %.3f GET/task × %v (%d KiB) = %.0f µs/task; %.1f S3 requests/task\n",
				s.n, s.runJSONGets, s.decode.Round(time.Microsecond), s.runJSONBytes>>10, us, s.reqPerTask)
		}
		first, last := samples[0], samples[len(samples)-1]
		flat := last.runJSONGets*float64(last.decode) <= 1.2*max(first.runJSONGets*float64(first.decode), float64(100*time.Microsecond))
		report(orderRunJSON, fmt.Sprintf("run.json fetch+decode per task (S3), N=%s", joinInts(ns)),
			fmt.Sprintf("%s µs (GETs/task %.3f→%.3f; one decode %v→%v)", strings.Join(cells, " / "),
				first.runJSONGets, last.runJSONGets, first.decode.Round(time.Microsecond), last.decode.Round(time.Microsecond)),
			"O(1) per task", ok(flat))
	}
}

// timeRunJSON times one fetch and decode of a run's run.json (median of 5)
// and returns its size.
func timeRunJSON(b *testing.B, store artifacts.Store, run string) (int, time.Duration) {
	ctx := context.Background()
	raw, err := artifacts.ReadObject(ctx, store, artifacts.RunKey(run), artifacts.MaxJSONSize)
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		var spec jobs.RunSpec
		if err := artifacts.GetJSON(ctx, store, artifacts.RunKey(run), &spec); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	return len(raw), medianDur(ds)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, "/")
}

// describeDiv is describe with every count divided by reps.
func describeDiv(c map[string]int, reps int) string {
	d := map[string]int{}
	for k, v := range c {
		d[k] = v / reps
	}
	return describe(d)
}
