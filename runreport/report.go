package runreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Report is what a run page shows.
type Report struct {
	Run        string
	Model      string
	Target     string
	Platform   string
	Strategy   string
	Candidates []string
	Status     string // running | done | failed | cancelled
	Reasons    []string
	CreatedAt  time.Time
	FinishedAt time.Time
	Graphs     []Graph
}

// Graph is one graph of a run.
type Graph struct {
	Name   string
	Status string // pending | done | failed | cancelled
	// Class and Message say why the graph has no winner (the run
	// record's, when there is no result to say it).
	Class, Message string
	// Attempts and LastError follow a graph still pending.
	Attempts  int
	LastError string
	// Result is the graph's result.json; nil when it has none (yet), or
	// when it could not be read: then Unreadable says why.
	Result     *tuner.Result
	Unreadable string
}

// DecodeResult decodes a result.json, refusing one of another format: a
// page shows the reason rather than a graph of zeroes.
func DecodeResult(data []byte) (*tuner.Result, error) {
	var r tuner.Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if r.Format != tuner.ResultFormat {
		return nil, fmt.Errorf("format %q, want %q", r.Format, tuner.ResultFormat)
	}
	for i, c := range r.Results {
		if c.Candidate == "" {
			return nil, fmt.Errorf("results[%d] names no candidate", i)
		}
	}
	if w := r.Winner; w != nil && (w.Index < 0 || w.Index >= len(r.Results)) {
		return nil, fmt.Errorf("winner index %d is outside the %d results", w.Index, len(r.Results))
	}
	return &r, nil
}

// Winner is the graph's winning candidate, "" without one.
func (g Graph) Winner() string {
	if g.Result != nil && g.Result.Winner != nil {
		return g.Result.Winner.Candidate
	}
	return ""
}

// Speedup is the winner's speedup over the baseline, nil without one.
func (g Graph) Speedup() *strategy.Speedup { return g.Result.Speedup() }

// Why is the strategy's reason for the winner.
func (g Graph) Why() string {
	if g.Result != nil && g.Result.Winner != nil {
		return g.Result.Winner.Reason
	}
	return ""
}

// Failure is why the graph has no winner: its result's failure, else the
// run record's.
func (g Graph) Failure() (class, message string) {
	if g.Result != nil && g.Result.Failure != nil {
		return string(g.Result.Failure.Class), g.Result.Failure.Message
	}
	return g.Class, g.Message
}

// Headline is the winner's measurement at the batch size it was chosen at,
// else its best throughput: strategy.Headline, the rule history.BenchOf
// and every table use.
func (g Graph) Headline() (backend.Stats, bool) {
	r := g.Result
	if r == nil || r.Winner == nil {
		return backend.Stats{}, false
	}
	return strategy.Headline(&r.Winner.Selection, r.Results[r.Winner.Index].Benchmarks)
}

// Batches are the batch sizes the graph's candidates were measured at,
// ascending: the sweep's, or (a graph measured once, unswept) those its
// benchmarks record.
func (g Graph) Batches() []int {
	if g.Result == nil {
		return nil
	}
	seen := map[int]bool{}
	var out []int
	add := func(b int) {
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	for _, b := range g.Result.BatchSizes {
		add(b)
	}
	for _, c := range g.Result.Results {
		for _, s := range c.Benchmarks {
			add(s.BatchSize)
		}
	}
	sort.Ints(out)
	return out
}

// Measured are the candidates that have benchmarks: the series of the
// graph's chart.
func (g Graph) Measured() []backend.CandidateResult {
	if g.Result == nil {
		return nil
	}
	var out []backend.CandidateResult
	for _, c := range g.Result.Results {
		if len(c.Benchmarks) > 0 {
			out = append(out, c)
		}
	}
	return out
}
