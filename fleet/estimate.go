package fleet

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/parallel"
)

// enqueueTies is how many tasks of equal rank (the same class, priority
// and expected seconds) are enqueued at once.
const enqueueTies = 16

// enqueueInOrder enqueues the tasks in order. An enqueue is a round trip
// to Redis; one after the other, a night of 10,000 graphs waited for
// 10,000 of them. Tasks of equal rank in the planned order (the same
// class, priority and expected seconds: a cold night's graphs of one size,
// whose guesses are equal) may reach their queue in any order among
// themselves, as their place in it was arbitrary to begin with, so they
// go several at once; each group waits for the one before it. The
// submission order is kept exactly.
func (s *Submitter) enqueueInOrder(ctx context.Context, tasks []held, nt []nightplan.Task, order []int, submission bool) error {
	tie := func(a, b int) bool {
		x, y := nt[a], nt[b]
		return !submission && x.Class == y.Class && x.Priority == y.Priority && x.Seconds == y.Seconds
	}
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && tie(order[start], order[end]) {
			end++
		}
		group := order[start:end]
		err := parallel.ForEach(ctx, len(group), enqueueTies, func(ctx context.Context, k int) error {
			_, err := s.Client.EnqueueHeld(ctx, tasks[group[k]].task)
			return err
		})
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// Orders of a nightly's enqueue.
const (
	OrderPlanned    = "planned"    // within a class: priority, then longest expected first
	OrderSubmission = "submission" // the fleet file's order (priority, model, target), graphs as the bundle lists them
)

// pastDepth is how many of a model's newest history entries on a class
// are read for its estimate: the newest with the same candidates is
// usually the first.
const pastDepth = 3

// pasts reads the newest history entries of model on class (the class's
// history, which finalize files every run under), newest first, as
// nightplan reads them.
func pasts(ctx context.Context, store artifacts.Store, model, class string) ([]nightplan.Past, error) {
	// The head names the newest entries: a night's planning reads a few
	// documents per model, whatever the length of its history.
	keys, err := history.Recent(ctx, store, model, class, pastDepth)
	if err != nil {
		return nil, err
	}
	var out []nightplan.Past
	for i := len(keys) - 1; i >= 0 && len(out) < pastDepth; i-- {
		e, err := history.Read(ctx, store, keys[i])
		if err != nil {
			return nil, err
		}
		// The nightly's estimate uses only entries tuned with the same
		// candidates; entries from before settings were recorded have none.
		var cands []string
		if e.Settings != nil {
			cands = e.Settings.Candidates
		}
		p := nightplan.Past{Candidates: cands, Seconds: map[string]float64{}}
		for _, g := range e.Graphs {
			// A reused graph's entry keeps what it cost when it was tuned.
			if s := max(g.SpentSeconds, g.SavedSeconds); s > 0 {
				p.Seconds[g.Name] = s
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// LiveWindow is how recent a worker's heartbeat must be for its task
// slots to count in a nightly's expected finish: a few heartbeats.
const LiveWindow = 3 * jobs.DefaultHeartbeat

// RegisteredWorkers counts the task slots of the live workers serving
// each of classes (runstate.LiveSlots: workers register them with their
// heartbeat, and remove them when they stop).
func RegisteredWorkers(ctx context.Context, rdb redis.UniversalClient, classes []string, now time.Time) (map[string]int, error) {
	out := map[string]int{}
	for _, c := range classes {
		n, err := runstate.LiveSlots(ctx, rdb, c, now.Add(-LiveWindow))
		if err != nil {
			return nil, err
		}
		if n > 0 {
			out[c] = n
		}
	}
	return out, nil
}

// held is one graph task held for the planned enqueue.
type held struct {
	entry int // index in the plan's entries
	task  jobs.HeldTask
}

// enqueuePlanned estimates every held task, enqueues them in order and
// returns the night's estimate (its Deadline and Short still to fill).
func (s *Submitter) enqueuePlanned(ctx context.Context, plan *state.Plan, entries []Entry, tasks []held, known, guessed []map[string]float64, o Options) (*state.PlanEstimate, error) {
	nt := make([]nightplan.Task, len(tasks))
	for i, h := range tasks {
		e := entries[h.entry]
		sec, ok := known[h.entry][h.task.Graph]
		nt[i] = nightplan.Task{Class: e.Target, Priority: e.Priority, Seconds: sec, Known: ok && sec > 0, Index: i,
			Guess: guessed[h.entry][h.task.Graph]}
	}
	defaults := nightplan.Fill(nt, o.DefaultSeconds)
	order := nightplan.Order(nt)
	how := OrderPlanned
	if o.SubmissionOrder {
		how = OrderSubmission
		for i := range order {
			order[i] = i
		}
	}
	if err := s.enqueueInOrder(ctx, tasks, nt, order, o.SubmissionOrder); err != nil {
		return nil, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	est := &state.PlanEstimate{Order: how, EnqueuedAt: now().UTC(), Classes: []state.ClassEstimate{}}
	for i, h := range tasks {
		pe := &plan.Entries[h.entry]
		src := state.EstimateDefault
		switch {
		case nt[i].Known:
			src = state.EstimateHistory
		case nt[i].Guessed && nt[i].Guess > 0 && o.DefaultSeconds <= 0:
			src = state.EstimateGuess
		}
		pe.Estimates = append(pe.Estimates, state.GraphEstimate{Graph: h.task.Graph, Seconds: nt[i].Seconds, Source: src})
		pe.ExpectedSeconds += nt[i].Seconds
	}

	workers, from := map[string]int{}, map[string]string{}
	if s.Workers != nil {
		var classes []string
		for _, t := range nt {
			if !slices.Contains(classes, t.Class) {
				classes = append(classes, t.Class)
			}
		}
		reg, err := s.Workers(ctx, classes)
		if err != nil {
			return nil, err
		}
		for c, n := range reg {
			workers[c], from[c] = n, state.WorkersRegistered
		}
	}
	for c, n := range o.Workers { // an assumption replaces what is live
		workers[c], from[c] = n, state.WorkersAssumed
	}
	classes := nightplan.Plan(nt, order, workers)
	guessClass := map[string]bool{}
	for _, t := range nt {
		if t.Guessed {
			guessClass[t.Class] = true
		}
	}
	for _, cp := range classes {
		ce := state.ClassEstimate{Class: cp.Class, Graphs: cp.Graphs, DeviceSeconds: cp.DeviceSeconds, LongestSeconds: cp.Longest,
			DefaultSeconds: defaults[cp.Class], Guess: guessClass[cp.Class], Workers: cp.Workers, WorkersFrom: from[cp.Class]}
		est.Guess = est.Guess || ce.Guess
		if ce.WorkersFrom == "" || ce.Workers == 0 {
			ce.WorkersFrom, ce.Workers = state.WorkersNone, 0
		} else {
			ce.MakespanSeconds = cp.Makespan
		}
		est.Classes = append(est.Classes, ce)
	}
	if f, ok := nightplan.Finish(est.EnqueuedAt, classes); ok {
		est.ExpectedFinish = &f
	}
	if !o.Deadline.IsZero() {
		d := o.Deadline.UTC()
		est.Deadline = &d
		for _, sh := range nightplan.ShortOf(classes, est.EnqueuedAt, o.Deadline) {
			est.Short = append(est.Short, state.ShortClass{Class: sh.Class, Workers: sh.Workers, Needed: sh.Needed})
		}
	}
	return est, nil
}

// DeadlineWarning is the warning a night that will not fit before its
// deadline gets (on stderr and the webhook): when it is expected to end
// and, per class short of workers, how many it has and how many would
// fit. Empty when the night fits or has no deadline.
func DeadlineWarning(p *state.Plan) string {
	est := p.Estimate
	if est == nil || est.Deadline == nil || len(est.Short) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nightly %s will not finish by its deadline %s", p.Nightly, est.Deadline.Format(time.RFC3339))
	if est.ExpectedFinish != nil {
		fmt.Fprintf(&b, " (expected %s%s)", est.ExpectedFinish.Format(time.RFC3339), guessNote(est))
	}
	b.WriteString(":")
	longest := map[string]float64{}
	for _, c := range est.Classes {
		longest[c.Class] = c.LongestSeconds
	}
	for _, sh := range est.Short {
		fmt.Fprintf(&b, " %s;", nightplan.Short{Class: sh.Class, Workers: sh.Workers, Needed: sh.Needed, Fits: sh.Needed > 0, Longest: longest[sh.Class]})
	}
	return strings.TrimSuffix(b.String(), ";")
}

// guessNote marks a guessed estimate in a warning: a first night's
// finish comes from its bundles, not from history, and may be far off.
func guessNote(est *state.PlanEstimate) string {
	if est.Guess {
		return ", a guess: no history yet"
	}
	return ""
}

// EstimateLine is the plan's estimate in one line: expected device time
// per class and the expected finish (or why there is none).
func EstimateLine(p *state.Plan) string {
	est := p.Estimate
	if est == nil {
		return ""
	}
	var parts []string
	for _, c := range est.Classes {
		w := fmt.Sprintf("%d %s worker(s)", c.Workers, c.WorkersFrom)
		if c.WorkersFrom == state.WorkersNone {
			w = "no worker"
		}
		parts = append(parts, fmt.Sprintf("%s %d graph(s) %s on %s", c.Class, c.Graphs, human.Seconds(c.DeviceSeconds), w))
	}
	finish := "unknown (a class has no worker: give --workers CLASS=N)"
	if est.ExpectedFinish != nil {
		finish = est.ExpectedFinish.Format(time.RFC3339)
		if est.Guess {
			var none []string
			for _, c := range est.Classes {
				if c.Guess {
					none = append(none, c.Class)
				}
			}
			finish += fmt.Sprintf(" (a guess: no history on %s yet, estimated from the bundles)", strings.Join(none, ", "))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to tune")
		finish = est.EnqueuedAt.Format(time.RFC3339)
	}
	return fmt.Sprintf("estimate (%s order): %s; expected finish %s", est.Order, strings.Join(parts, ", "), finish)
}

// guesses are a first night's estimates of hs's graphs from the bundle
// (nightplan.Guess): its candidates, the batch sizes the sweep may
// measure, the bench time and the graph's size. Used only when the
// class has no history at all.
func guesses(e Entry, b *bundle.Bundle, hs []jobs.HeldTask) map[string]float64 {
	o := e.Options
	bench := cmp.Or(o.BenchTime, backend.DefaultStopRule().MaxTime)
	warm := cmp.Or(o.Warmup, bench/4)
	backends := make([]string, len(o.Candidates))
	for i, c := range o.Candidates {
		backends[i] = c.Backend
	}
	out := map[string]float64{}
	for _, h := range hs {
		g, ok := b.Manifest.Graph(h.Graph)
		if !ok {
			continue
		}
		var size int64
		for _, rel := range append([]string{g.ONNX}, g.ExternalData...) {
			if fi, err := os.Stat(filepath.Join(b.Dir, filepath.FromSlash(rel))); err == nil {
				size += fi.Size()
			}
		}
		sizes := shapes.BatchSizes(bundle.Specs(g.Inputs), b.Manifest.DynamicShapes, shapes.DefaultBatchSizes())
		out[h.Graph] = nightplan.Guess(nightplan.GraphWork{Backends: backends, BatchSizes: len(sizes), BenchTime: bench, Warmup: warm, ModelBytes: size})
	}
	return out
}

func candidateStrings(e Entry) []string {
	out := make([]string, len(e.Options.Candidates))
	for i, c := range e.Options.Candidates {
		out[i] = c.String()
	}
	return out
}
