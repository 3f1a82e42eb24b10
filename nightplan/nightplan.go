package nightplan

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/noise"

	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/internal/human"
)

// Sources of a graph's estimate.
const (
	SourceHistory = "history" // what it took last time, same candidates, same class
	SourceDefault = "default" // no history: the class's default
	SourceGuess   = "guess"   // no history in its class at all: guessed from the bundle
)

// DefaultSeconds is a graph's estimate when its class has no graph with
// a history at all and nothing better is known of it (no Guess): TensorRT
// builds take minutes.
const DefaultSeconds = 300.0

// Task is one graph to enqueue.
type Task struct {
	Class    string // the target class (its queue)
	Priority int    // the fleet file's priority: higher first
	// Seconds is the estimate; Known says it came from history.
	Seconds float64
	Known   bool
	Index   int // submission order, for ties
	// Guess is what the graph is guessed to take from its bundle (Guess),
	// used only when its class has no history at all; 0: none.
	Guess float64
	// Guessed says Seconds is a guess (set by Fill): its class had no
	// graph with a history, so the estimate comes from the bundle or a
	// constant, and can be off many times over.
	Guessed bool
}

// Fill gives every task without a history its class's default: the
// median of the class's known estimates; in a class with none (a first
// night), the task's Guess, else fallback (DefaultSeconds when fallback
// <= 0), and such a task is marked Guessed. A fallback > 0 replaces the
// guesses (--estimate-default: the operator knows better). It returns the
// class defaults used (the median, or the fallback), by class.
func Fill(tasks []Task, fallback float64) map[string]float64 {
	override := fallback > 0
	if !override {
		fallback = DefaultSeconds
	}
	known := map[string][]float64{}
	for _, t := range tasks {
		if t.Known {
			known[t.Class] = append(known[t.Class], t.Seconds)
		}
	}
	defaults := map[string]float64{}
	for i := range tasks {
		t := &tasks[i]
		if t.Known {
			continue
		}
		ks := known[t.Class]
		if len(ks) == 0 {
			t.Guessed = true
			if t.Guess > 0 && !override {
				t.Seconds = t.Guess
				continue
			}
		}
		d, ok := defaults[t.Class]
		if !ok {
			d = fallback
			if len(ks) > 0 {
				d = Median(ks)
			}
			defaults[t.Class] = d
		}
		t.Seconds = d
	}
	return defaults
}

// GraphWork is what a bundle says of one graph's tuning before it was
// ever tuned: what Guess reads.
type GraphWork struct {
	// Backends are the candidates' backends, one per candidate ("ort",
	// "trt").
	Backends []string
	// BatchSizes is how many batch sizes the sweep may measure (0: the
	// graph's batch is fixed, one measurement).
	BatchSizes int
	// BenchTime and Warmup bound one measurement and its warm-up.
	BenchTime, Warmup time.Duration
	// ModelBytes is the size of the ONNX graph and its external data.
	ModelBytes int64
}

// The guess's constants. A sweep stops once throughput stops rising
// (backend.SweepState), which on the bundles we know takes about three
// batch sizes; a measurement runs to its bench time at most. Building an
// engine costs ONNX Runtime about a second plus the time to read the
// graph, TensorRT minutes.
const (
	guessPoints       = 3
	ortBuildSeconds   = 1.0
	ortBytesPerSecond = 200 << 20
	trtBuildSeconds   = 300.0
	trtBytesPerSecond = 20 << 20
)

// Guess is a first night's estimate of one graph's tuning from its
// bundle and settings alone: per candidate, building its engine and
// measuring up to guessPoints batch sizes, each a warm-up and at most a
// bench time. It is a bound more than a forecast (a measurement may stop
// before its bench time), and is labelled a guess wherever it is shown.
func Guess(w GraphWork) float64 {
	points := float64(min(max(w.BatchSizes, 1), guessPoints))
	measure := points * (w.BenchTime + w.Warmup).Seconds()
	total := 0.0
	for _, b := range w.Backends {
		build := ortBuildSeconds + float64(w.ModelBytes)/ortBytesPerSecond
		if b == "trt" {
			build = trtBuildSeconds + float64(w.ModelBytes)/trtBytesPerSecond
		}
		total += build + measure
	}
	return total
}

// Median of xs (0 for none); xs is left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return noise.Quantile(s, 0.5)
}

// Order returns the indexes of tasks in enqueue order: by class, then
// priority (higher first), then expected seconds (longest first), then
// submission order.
func Order(tasks []Task) []int {
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		x, y := tasks[a], tasks[b]
		return cmp.Or(cmp.Compare(x.Class, y.Class), cmp.Compare(y.Priority, x.Priority),
			cmp.Compare(y.Seconds, x.Seconds), cmp.Compare(x.Index, y.Index))
	})
	return idx
}

// Makespan simulates list scheduling: durations taken in order, each by
// the first worker free. workers < 1 gives +Inf for any work.
func Makespan(durations []float64, workers int) float64 {
	if len(durations) == 0 {
		return 0
	}
	if workers < 1 {
		return inf
	}
	h := make(freeAt, min(workers, len(durations)))
	end := 0.0
	for _, d := range durations {
		t := h[0] + d
		h[0] = t
		heap.Fix(&h, 0)
		end = max(end, t)
	}
	return end
}

// LowerBound is no schedule's makespan can beat: max(total ÷ workers,
// longest).
func LowerBound(durations []float64, workers int) float64 {
	if workers < 1 {
		return inf
	}
	total, longest := 0.0, 0.0
	for _, d := range durations {
		total += d
		longest = max(longest, d)
	}
	return max(total/float64(workers), longest)
}

var inf = func() float64 { var z float64; return 1 / z }()

type freeAt []float64

func (h freeAt) Len() int           { return len(h) }
func (h freeAt) Less(i, j int) bool { return h[i] < h[j] }
func (h freeAt) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *freeAt) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *freeAt) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// MaxWorkers bounds WorkersToFit's search.
const MaxWorkers = 100000

// WorkersToFit is the fewest workers whose simulated makespan of
// durations (in order) is at most within seconds; ok is false when none
// does (a graph alone is longer than within).
func WorkersToFit(durations []float64, within float64) (n int, ok bool) {
	if len(durations) == 0 {
		return 0, true
	}
	if slices.Max(durations) > within {
		return 0, false
	}
	lo, hi := 1, min(len(durations), MaxWorkers) // with one worker per graph, the longest is the makespan
	for lo < hi {
		mid := (lo + hi) / 2
		if Makespan(durations, mid) <= within {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// ClassPlan is one class's share of the night.
type ClassPlan struct {
	Class         string
	Graphs        int
	DeviceSeconds float64 // the sum of its graphs' estimates
	Longest       float64
	Workers       int     // 0: none registered and none assumed
	Makespan      float64 // simulated; +Inf with no worker
	// Durations in enqueue order (for WorkersToFit).
	Durations []float64
}

// Plan simulates each class's makespan with its workers, tasks taken in
// order (indexes into tasks, as Order gives them).
func Plan(tasks []Task, order []int, workers map[string]int) []ClassPlan {
	by := map[string]*ClassPlan{}
	for _, i := range order {
		t := tasks[i]
		c := by[t.Class]
		if c == nil {
			c = &ClassPlan{Class: t.Class, Workers: workers[t.Class]}
			by[t.Class] = c
		}
		c.Graphs++
		c.DeviceSeconds += t.Seconds
		c.Longest = max(c.Longest, t.Seconds)
		c.Durations = append(c.Durations, t.Seconds)
	}
	out := make([]ClassPlan, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		c := by[k]
		c.Makespan = Makespan(c.Durations, c.Workers)
		out = append(out, *c)
	}
	return out
}

// Finish is when the night is expected to end: start plus the slowest
// class's makespan; ok is false when a class has work and no worker.
func Finish(start time.Time, classes []ClassPlan) (time.Time, bool) {
	span := 0.0
	for _, c := range classes {
		if c.Workers < 1 {
			return time.Time{}, false
		}
		span = max(span, c.Makespan)
	}
	return start.Add(time.Duration(span * float64(time.Second))), true
}

// Short is a class whose work does not fit before a deadline.
type Short struct {
	Class   string
	Workers int // what it has (registered or assumed)
	// Needed is the fewest workers that fit; 0 with Fits false when no
	// count does (a graph alone is longer than the time left).
	Needed int
	Fits   bool
	// Longest is the class's longest graph estimate (what rules out a fit).
	Longest float64
}

func (s Short) String() string {
	switch {
	case !s.Fits:
		return fmt.Sprintf("%s: its longest graph alone is expected to take %s, past the deadline with any number of workers", s.Class, human.Seconds(s.Longest))
	case s.Workers == 0:
		return fmt.Sprintf("%s: no worker, %d would fit", s.Class, s.Needed)
	default:
		return fmt.Sprintf("%s: %d worker(s), %d would fit", s.Class, s.Workers, s.Needed)
	}
}

// ShortOf are the classes that do not fit before deadline when their
// work starts at start.
func ShortOf(classes []ClassPlan, start, deadline time.Time) []Short {
	within := deadline.Sub(start).Seconds()
	var out []Short
	for _, c := range classes {
		if c.Workers >= 1 && c.Makespan <= within {
			continue
		}
		n, ok := WorkersToFit(c.Durations, within)
		out = append(out, Short{Class: c.Class, Workers: c.Workers, Needed: n, Fits: ok, Longest: c.Longest})
	}
	return out
}

// ParseWorkers reads --workers CLASS=N[,CLASS=N...] (the flag may be
// repeated: each value is one or more pairs).
func ParseWorkers(values []string) (map[string]int, error) {
	out := map[string]int{}
	for _, v := range values {
		for _, pair := range strings.Split(v, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			class, n, ok := strings.Cut(pair, "=")
			count, err := strconv.Atoi(n)
			if !ok || class == "" || err != nil || count < 1 {
				return nil, fmt.Errorf("--workers %q: want CLASS=N with N a positive count, e.g. gpu.h100=4", clip.Text(pair, clip.Echo))
			}
			out[class] = count
		}
	}
	return out, nil
}

// ParseDeadline reads --deadline: RFC 3339 (2026-12-02T06:00:00+01:00),
// or a clock time HH:MM, optionally followed by a zone (an IANA name such
// as Europe/Paris, UTC, or an offset such as +01:00); a clock time with no
// zone is in loc. A clock time is its next occurrence after now.
func ParseDeadline(s string, now time.Time, loc *time.Location) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf("--deadline %q: want a clock time such as 06:00 (local), 06:00 Europe/Paris, 06:00+01:00, or an RFC 3339 time", clip.Text(s, clip.Echo))
	}
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if len(s) < 5 {
		return bad()
	}
	clock, zone := s[:5], strings.TrimSpace(s[5:])
	hm, err := time.Parse("15:04", clock)
	if err != nil {
		return bad()
	}
	switch {
	case zone == "":
	case zone[0] == '+' || zone[0] == '-':
		off, err := time.Parse("-07:00", zone)
		if err != nil {
			return bad()
		}
		_, secs := off.Zone()
		loc = time.FixedZone(zone, secs)
	default:
		l, err := time.LoadLocation(zone)
		if err != nil {
			return bad()
		}
		loc = l
	}
	n := now.In(loc)
	t := time.Date(n.Year(), n.Month(), n.Day(), hm.Hour(), hm.Minute(), 0, 0, loc)
	if !t.After(now) {
		t = time.Date(n.Year(), n.Month(), n.Day()+1, hm.Hour(), hm.Minute(), 0, 0, loc)
	}
	return t, nil
}

// Past is an earlier run of a model on a class: its candidates (nil for
// an entry written before they were recorded) and what each graph took.
type Past struct {
	Candidates []string
	Seconds    map[string]float64 // by graph name; 0 or absent: unknown
}

// Pick is each graph's seconds: the median over the past runs with the
// same candidates (pasts newest first, as many as the caller read: a
// median of a few nights is less moved by one night's noise than the last
// night alone); past runs with no candidates recorded are used only when
// none matches. Another candidate set measures other work, so it is not
// used at all.
func Pick(pasts []Past, candidates []string) map[string]float64 {
	var match, legacy []Past
	for _, p := range pasts {
		switch {
		case p.Candidates == nil:
			legacy = append(legacy, p)
		case slices.Equal(p.Candidates, candidates):
			match = append(match, p)
		}
	}
	if len(match) == 0 {
		match = legacy
	}
	if len(match) == 0 {
		return nil
	}
	all := map[string][]float64{}
	for _, p := range match {
		for g, s := range p.Seconds {
			if s > 0 {
				all[g] = append(all[g], s)
			}
		}
	}
	out := make(map[string]float64, len(all))
	for g, xs := range all {
		out[g] = Median(xs)
	}
	return out
}
