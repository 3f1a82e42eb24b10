package runstate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Summary is what a runs list says of a run beyond its counts.
type Summary struct {
	// Winners sums the graphs' winners up, in graph order:
	// "ort:cpu:all ×2, ort:cpu:basic".
	Winners string `json:"winners,omitempty"`
	// Speedup is the geometric mean over graphs of each winner's speedup
	// over the baseline candidate (0: none measured), over SpeedupGraphs.
	Speedup       float64 `json:"speedup,omitempty"`
	SpeedupGraphs int     `json:"speedup_graphs,omitempty"`
	// Reused counts the graphs completed from the result index;
	// ReusedFrom are the runs that measured them (where recorded).
	Reused     int      `json:"reused,omitempty"`
	ReusedFrom []string `json:"reused_from,omitempty"`
}

// Summary sums the run's graphs up, or is the summary finalize recorded
// when the run was listed without its graphs.
func (r RunStatus) Summary() Summary {
	if r.summary != nil && len(r.Graphs) == 0 {
		return *r.summary
	}
	var s Summary
	count := map[string]int{}
	var order []string
	var logSum float64
	from := map[string]bool{}
	for _, g := range r.GraphNames() {
		gs := r.Graphs[g]
		if gs.Winner != "" && gs.Status == GraphDone {
			if count[gs.Winner] == 0 {
				order = append(order, gs.Winner)
			}
			count[gs.Winner]++
		}
		if sp := gs.Speedup; sp != nil && sp.Ratio.Value > 0 && !math.IsInf(sp.Ratio.Value, 0) {
			logSum += math.Log(sp.Ratio.Value)
			s.SpeedupGraphs++
		}
		if gs.ReusedFrom != "" || strings.HasPrefix(gs.Reason, "reused: ") {
			s.Reused++
			if gs.ReusedFrom != "" && !from[gs.ReusedFrom] {
				from[gs.ReusedFrom] = true
				s.ReusedFrom = append(s.ReusedFrom, gs.ReusedFrom)
			}
		}
	}
	var parts []string
	for _, w := range order {
		if count[w] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", w, count[w]))
		} else {
			parts = append(parts, w)
		}
	}
	s.Winners = strings.Join(parts, ", ")
	if s.SpeedupGraphs > 0 {
		s.Speedup = math.Exp(logSum / float64(s.SpeedupGraphs))
	}
	return s
}

// SetSummary records a final run's summary in its record, so that a
// listing reads one field of a run instead of every graph of it: a page
// of runs then costs the same whatever their size (ListOptions.Graphs).
// Finalize calls it once the run is final; a run without one (finalized
// before summaries were kept, cancelled, restored) is summed up from its
// graphs as before.
func (r *Runs) SetSummary(ctx context.Context, run string, s Summary) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("record run %s's summary: %w", run, err)
	}
	if err := r.rdb.HSet(ctx, runKey(run), "summary", b).Err(); err != nil {
		return fmt.Errorf("record run %s's summary: %w", run, err)
	}
	return nil
}
