package fleet

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// Progress is a night under way re-estimated: the graphs its runs have
// not finished yet, with their plan estimates, simulated on the workers
// there are now. It is what `nightly --wait` re-checks the deadline with,
// so that a night that fitted at submit and then fell behind (a worker
// lost, graphs slower than their history) is said while there is still
// time to add workers, not found in the morning.
type Progress struct {
	At time.Time
	// Left is how many graphs are not finished, and their estimated
	// device seconds, by class. A graph being tuned counts whole: its
	// elapsed time is not known here, so the re-check errs early.
	Left        map[string]int
	LeftSeconds map[string]float64
	Classes     []nightplan.ClassPlan
	// ExpectedFinish is zero when a class with work left has no worker.
	ExpectedFinish time.Time
	// Short are the classes that do not fit before the plan's deadline
	// (none without a deadline).
	Short []nightplan.Short
}

// Reestimate re-estimates plan at now from its runs' statuses (by run id,
// as Wait reads them) on workers (task slots by class: registered now, or
// the plan's assumption). Graphs of an entry the plan has no estimate for
// (an entry submitted before estimates were written) get the class's
// longest estimate.
func Reestimate(plan *state.Plan, runs map[string]runstate.RunStatus, workers map[string]int, now time.Time) Progress {
	p := Progress{At: now, Left: map[string]int{}, LeftSeconds: map[string]float64{}}
	var tasks []nightplan.Task
	longest := map[string]float64{}
	if plan.Estimate != nil {
		for _, c := range plan.Estimate.Classes {
			longest[c.Class] = c.LongestSeconds
		}
	}
	for _, e := range plan.Entries {
		st, ok := runs[e.Run]
		if e.Run == "" || !ok || st.Final() {
			continue
		}
		est := map[string]float64{}
		for _, g := range e.Estimates {
			est[g.Graph] = g.Seconds
		}
		for _, name := range slices.Sorted(maps.Keys(st.Graphs)) {
			if st.Graphs[name].Status != runstate.GraphPending {
				continue
			}
			sec, ok := est[name]
			if !ok {
				sec = longest[e.Target]
			}
			tasks = append(tasks, nightplan.Task{Class: e.Target, Seconds: sec, Known: true, Index: len(tasks)})
			p.Left[e.Target]++
			p.LeftSeconds[e.Target] += sec
		}
	}
	p.Classes = nightplan.Plan(tasks, nightplan.Order(tasks), workers)
	if f, ok := nightplan.Finish(now, p.Classes); ok {
		p.ExpectedFinish = f
	}
	if est := plan.Estimate; est != nil && est.Deadline != nil {
		p.Short = nightplan.ShortOf(p.Classes, now, *est.Deadline)
	}
	return p
}

// LateWarning is the warning of a night that has fallen behind its
// deadline since it was planned: when it is now expected to end and, per
// class short of workers, how many it has and how many would fit. Empty
// when the night still fits, has no deadline, or was already short when
// it was planned (DeadlineWarning said so then).
func LateWarning(plan *state.Plan, p Progress) string {
	est := plan.Estimate
	if est == nil || est.Deadline == nil || len(est.Short) > 0 || len(p.Short) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nightly %s has fallen behind: it will not finish by its deadline %s", plan.Nightly, est.Deadline.Format(time.RFC3339))
	if !p.ExpectedFinish.IsZero() {
		fmt.Fprintf(&b, " (now expected %s", p.ExpectedFinish.UTC().Format(time.RFC3339))
		if est.ExpectedFinish != nil {
			fmt.Fprintf(&b, "; planned %s%s", est.ExpectedFinish.Format(time.RFC3339), guessNote(est))
		}
		b.WriteString(")")
	}
	b.WriteString(":")
	for _, sh := range p.Short {
		fmt.Fprintf(&b, " %s (%d graph(s) left, %s);", sh, p.Left[sh.Class], human.Seconds(p.LeftSeconds[sh.Class]))
	}
	return strings.TrimSuffix(b.String(), ";")
}
