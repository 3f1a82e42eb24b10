package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/noise"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// printRun prints a run's per-graph table and where its state is.
func printRun(w io.Writer, st runstate.RunStatus, store string) {
	st.Derive() // one state per graph, from what is known of it
	fmt.Fprintf(w, "run %s (model %s, target %s): %s\n", st.Run, st.Model, st.Target, st.Status)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	// STATUS is one view of the graph (runstate.RunStatus.Derive): its
	// final status, or while it is pending queued, retrying, starting,
	// running (its NOTE says the worker, phase, candidate and elapsed
	// time) or waiting (prefetched by a worker, for a slot); asynq's own
	// state of the task is in -o json. ATTEMPTS says how often a graph's
	// task was started (more than one: a worker died or the machine
	// failed it); hand-backs to another platform are not attempts.
	// RETRIED is how often asynq retried a pending graph's task.
	// SPEEDUP is the winner's over the baseline candidate, measured in
	// the same rounds (~: within noise of 1).
	fmt.Fprintln(tw, "GRAPH\tSTATUS\tWINNER\tSAMPLES/S\tBATCH\tCV\tSPEEDUP\tATTEMPTS\tRETRIED\tNOTE")
	var unstable []unstableNote
	for _, g := range st.GraphNames() {
		gs := st.Graphs[g]
		tput, batch, cv := benchCells(gs.Bench)
		if gs.Bench != nil && !gs.Bench.Stable {
			unstable = append(unstable, unstableNote{"graph " + g, gs.Bench.Stats().Cause()})
		}
		retried := "-"
		if gs.Task != nil {
			retried = fmt.Sprint(gs.Task.Retried)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", g, gs.StateText(), orDash(gs.Winner), tput, batch, cv,
			speedupCell(gs.Speedup), gs.Attempts, retried, graphNote(gs, time.Now()))
	}
	tw.Flush()
	if len(unstable) > 0 {
		fmt.Fprint(w, unstableFootnote(unstable, "graph(s)"))
	}
	if st.StateKey != "" && store != "" { // "": the store did not say it has it
		fmt.Fprintf(w, "state: %s\n", storeLocation(store, st.StateKey))
	}
	if st.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", st.Reason)
	}
}

// graphNote is the NOTE of a graph's row: the winner's reason, why it
// failed, or, while it is pending, when asynq tries it next and the last
// error of its task.
func graphNote(gs runstate.GraphStatus, now time.Time) string {
	switch gs.Status {
	case runstate.GraphFailed, runstate.GraphCancelled:
		return gs.Class + ": " + firstLine(gs.Message, 100)
	case runstate.GraphPending:
		return pendingNote(gs, now)
	}
	note := gs.Reason
	if gs.ReusedFrom != "" {
		note += "; measured by run " + gs.ReusedFrom
	}
	if gs.Speedup != nil {
		note += "; speedup " + gs.Speedup.Text()
	}
	if gs.Bench != nil && gs.Bench.Short {
		note += fmt.Sprintf("; measured from %d calls", gs.Bench.Samples)
	}
	if gs.Bench != nil && !gs.Bench.Stable {
		note += "; unstable: " + gs.Bench.Stats().Cause()
	}
	return note
}

func pendingNote(gs runstate.GraphStatus, now time.Time) string {
	var parts []string
	if gs.Progress != nil {
		parts = append(parts, gs.Progress.Text(now))
	}
	if t := gs.Task; t != nil && (t.State == "retry" || t.State == "scheduled") && t.NextProcessAt.After(now) {
		parts = append(parts, "next try in "+t.NextProcessAt.Sub(now).Round(time.Second).String())
	}
	if e := lastErrorNote(gs); e != "" {
		parts = append(parts, e)
	}
	return strings.Join(parts, "; ")
}

// lastErrorNote is a pending graph's last error. asynq's is the task's own
// (what status is asked for); the workers' record of the attempts has it
// too, with its failure class, and keeps it when asynq's record is gone
// (a re-enqueue).
func lastErrorNote(gs runstate.GraphStatus) string {
	msg := gs.LastError
	if gs.Task != nil && gs.Task.LastErr != "" {
		msg = gs.Task.LastErr
	}
	if msg == "" {
		return ""
	}
	class := ""
	if gs.LastClass != "" {
		class = gs.LastClass + ": "
	}
	return "last error: " + class + firstLine(msg, 100)
}

// speedupCell is a speedup's value, marked ~ when within noise of 1, or
// a dash without one.
func speedupCell(s *strategy.Speedup) string {
	if s == nil {
		return "-"
	}
	// One measurement compared with itself (the baseline won, or its
	// identical engine did) is no figure within noise: no mark.
	self := s.Identical || s.Ratio.Lo == 1 && s.Ratio.Hi == 1
	if !self && s.Ratio.Decide(noise.MinGain) == noise.Tie {
		return "~" + s.Short()
	}
	return s.Short()
}

// benchCells are a measurement's throughput (marked when unstable), batch
// size and CV, or dashes without one.
func benchCells(b *history.Bench) (tput, batch, cv string) {
	if b == nil {
		return "-", "-", "-"
	}
	return backend.Human(b.Throughput) + history.UnstableMark(b), fmt.Sprint(b.BatchSize), fmt.Sprintf("%.3f", b.CV)
}

// unstableNote is one marked figure of a table: where it is and the
// cause its measurement recorded.
type unstableNote struct{ where, cause string }

// unstableFootnote ends a table with its marked figures of what (rows):
// what the mark means, and for each figure the condition that fired and
// the advice that fits it, so that a reader does not take them at face
// value nor try a remedy for a cause that did not apply.
func unstableFootnote(notes []unstableNote, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s unstable (%d %s): what the figure is made of could move it (the rule: docs/measurement.md §3)\n", history.Unstable, len(notes), what)
	for _, n := range notes {
		fmt.Fprintf(&b, "  %s: %s: %s\n", n.where, n.cause, backend.Advice(n.cause))
	}
	return b.String()
}
