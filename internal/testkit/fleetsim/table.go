package fleetsim

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
)

// FlatBound is how much a per-graph figure (or a view's time over the
// night's history) may grow from the smallest night to the largest and
// still count as flat: beyond it the cost grows with the fleet.
const FlatBound = 1.5

// Table is the night's rows, one per line: row, measured, target, met.
func (r Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet night: %s\n", r.Config.Describe())
	fmt.Fprintf(&b, "  %d runs done, %d graphs done, %d state.json written; load %.1f → %.1f on %d cores\n",
		r.Runs, r.DoneGraphs, r.States, r.LoadBefore, r.LoadAfter, runtime.NumCPU())
	w := 0
	for _, row := range r.Rows {
		w = max(w, len([]rune(row.Name)))
	}
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "  %-*s  %s  (target %s, met: %s)\n", w, row.Name, row.Measured, row.Target, row.Met)
	}
	if r.BySender != nil {
		fmt.Fprintf(&b, "  Redis commands per graph by sender and command (MONITOR; the simulator's own left out):\n")
		r.BySender.Write(&b, "    ", r.Config.Graphs())
	}
	return b.String()
}

// higherIsBetter names the rows whose figure is a rate.
var higherIsBetter = map[string]bool{"finalize throughput": true}

// Compare sets the first night (the smallest) and the last (the largest)
// side by side: for each row with a target, the growth of its figure, at
// most FlatBound; for a view that shows more in a larger night (Row.Shows),
// at most FlatBound times what it shows the more (linear: a page of every
// run of the night may take ten times as long for ten times the runs, and
// more is a bend). A wall-clock row of a loaded night says undecided when
// it grew past its bound, and so does a row measured in rounds whose
// spread puts its growth on both sides of the bound.
func Compare(results []Result) []Row {
	if len(results) < 2 {
		return nil
	}
	first, last := results[0], results[len(results)-1]
	var out []Row
	for _, a := range first.Rows {
		b, ok := last.Row(a.Name)
		if !ok || a.Target == "—" || a.Value <= 0 || b.Value <= 0 {
			continue
		}
		growth := b.Value / a.Value
		if higherIsBetter[a.Name] {
			growth = a.Value / b.Value
		}
		bound, what := FlatBound, "flat"
		if a.Shows > 0 && b.Shows > 0 {
			bound, what = FlatBound*b.Shows/a.Shows, fmt.Sprintf("linear in what it shows: %.1f× the more", b.Shows/a.Shows)
		}
		why := ""
		if a.Lo > 0 && b.Lo > 0 && !higherIsBetter[a.Name] {
			// The rounds' spread: the least and the most the figure could
			// have grown, slowest small round to fastest large one and back.
			least, most := b.Lo/a.Hi, b.Hi/a.Lo
			if (least <= bound) != (most <= bound) {
				why = fmt.Sprintf("its rounds put the growth anywhere from %.2f× to %.2f×", least, most)
			}
		}
		if a.Wall && growth > bound && why == "" {
			for _, r := range []Result{first, last} {
				if l := max(r.LoadBefore, r.LoadAfter); l > 2*float64(runtime.NumCPU()) {
					why = fmt.Sprintf("load up to %.1f on %d cores", l, runtime.NumCPU())
				}
			}
		}
		out = append(out, Row{Name: a.Name, Value: growth,
			Measured: fmt.Sprintf("%.2f× (%s → %s graphs)", growth, thousands(first.Config.Graphs()), thousands(last.Config.Graphs())),
			Target:   fmt.Sprintf("≤ %.1f× (%s)", bound, what), Met: verdict.Of(growth <= bound, why)})
	}
	return out
}

// CompareTable is Compare's rows, one per line.
func CompareTable(results []Result) string {
	rows := Compare(results)
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fleet: largest ÷ smallest night, per graph (or per view over the night's history):\n")
	w := 0
	for _, row := range rows {
		w = max(w, len([]rune(row.Name)))
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "  %-*s  %s  (target %s, met: %s)\n", w, row.Name, row.Measured, row.Target, row.Met)
	}
	return b.String()
}
