package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/noise"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// ErrNoRun marks a run the store does not have (the user's mistake: exit
// 2, a 404).
var ErrNoRun = errors.New("no such run")

// ErrDifferentModels marks two runs of different models: a side by side
// of them is asked for explicitly (producer compare --different-models),
// never made by a slip of a run id.
var ErrDifferentModels = errors.New("runs of different models")

// SameModel returns an error wrapping ErrDifferentModels when a and b are
// runs of different models, naming both.
func SameModel(a, b *Run) error {
	if a.Model == b.Model {
		return nil
	}
	return fmt.Errorf("%w: %s is model %q, %s is model %q", ErrDifferentModels, a.Run, a.Model, b.Run, b.Model)
}

// Run is one side of a comparison: a run's record and its graphs'
// results in the bundle's graph order.
type Run struct {
	Run          string    `json:"run"`
	Model        string    `json:"model"`
	Target       string    `json:"target"`
	BundleDigest string    `json:"bundle_digest"`
	Strategy     string    `json:"strategy"`
	Candidates   []string  `json:"candidates"`
	SubmittedAt  time.Time `json:"submitted_at"`
	// Graphs are the bundle's graph names in order; Results the results
	// the store has (a graph still pending has none).
	Graphs  []string                 `json:"-"`
	Results map[string]*tuner.Result `json:"-"`
	// Unreadable are the graphs whose result.json does not decode, with
	// why: shown as such, the rest still compared.
	Unreadable map[string]string `json:"-"`
}

// Verdicts of a graph's comparison.
const (
	Faster      = "faster"       // b is faster than a beyond noise
	Slower      = "slower"       // b is slower than a beyond noise
	WithinNoise = "within_noise" // neither
	Missing     = "missing"      // one side has no measured winner
)

// VerdictText is a verdict in words, as tables and pages print it.
func VerdictText(v string) string {
	switch v {
	case WithinNoise:
		return "within noise"
	case Faster:
		return "B faster"
	case Slower:
		return "B slower"
	case Missing:
		return "not comparable"
	}
	return v
}

// Side is one run's winner of a graph and its measurement.
type Side struct {
	Winner string `json:"winner,omitempty"`
	// Status is done, failed, pending (no result yet), unreadable (its
	// result.json does not decode: Note says why) or absent (the run's
	// bundle has no such graph).
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
	// Throughput is the winner's samples/s: its headline figure, the
	// estimate the decision used and every other view shows (for a
	// measurement in rounds the centre of its rounds' interval), with its
	// interval Lo–Hi over the rounds (noise.Level; absent with fewer than
	// two), which contains it. Headline is the same figure, kept for
	// readers of the JSON that used it.
	Throughput float64 `json:"throughput,omitempty"`
	Headline   float64 `json:"headline,omitempty"`
	Lo         float64 `json:"lo,omitempty"`
	Hi         float64 `json:"hi,omitempty"`
	BatchSize  int     `json:"batch_size,omitempty"`
	Rounds     int     `json:"rounds,omitempty"`
	Reused     bool    `json:"reused,omitempty"`
	// Speedup over the run's baseline candidate.
	Speedup *strategy.Speedup `json:"speedup,omitempty"`

	costs []float64
}

// Graph is one graph compared.
type Graph struct {
	Name string `json:"name"`
	A    Side   `json:"a"`
	B    Side   `json:"b"`
	// Ratio is b's throughput over a's (> 1: b is faster), with its
	// interval; nil when a side has no measured winner.
	Ratio   *noise.Ratio `json:"ratio,omitempty"`
	Verdict string       `json:"verdict"`
	// SameWinner: both runs picked the same candidate.
	SameWinner bool `json:"same_winner"`
}

// Comparison is two runs side by side.
type Comparison struct {
	A      *Run    `json:"a"`
	B      *Run    `json:"b"`
	Graphs []Graph `json:"graphs"`
	// SameBundle: both runs tuned the same bundle (its digest).
	SameBundle bool `json:"same_bundle"`
	// BeyondNoise counts the graphs faster or slower beyond noise.
	BeyondNoise int `json:"beyond_noise"`
	// MinGain is the margin the decision rule asks beyond the interval.
	MinGain float64 `json:"min_gain"`
}

// Load reads run id from the store: run.json and every graph's
// result.json that exists. A run the store does not have is ErrNoRun.
func Load(ctx context.Context, store artifacts.Store, id string) (*Run, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || artifacts.CheckKey(artifacts.RunKey(id)) != nil {
		return nil, fmt.Errorf("%w: %q is not a run id", ErrNoRun, clip.Text(id, clip.Echo))
	}
	var spec jobs.RunSpec
	err := artifacts.GetJSON(ctx, store, artifacts.RunKey(id), &spec)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		return nil, fmt.Errorf("%w %s in %s (`producer runs` lists runs)", ErrNoRun, id, store)
	case err != nil:
		return nil, fmt.Errorf("read run.json of %s: %w", id, err)
	}
	r := &Run{Run: id, Model: spec.Model, Target: spec.Target, BundleDigest: spec.BundleDigest, Strategy: spec.Strategy,
		Candidates: spec.Candidates, SubmittedAt: spec.SubmittedAt, Results: map[string]*tuner.Result{}, Unreadable: map[string]string{}}
	for _, g := range spec.Manifest.Graphs {
		r.Graphs = append(r.Graphs, g.Name)
	}
	results := make([]*tuner.Result, len(r.Graphs))
	bad := make([]string, len(r.Graphs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, name := range r.Graphs {
		g.Go(func() error {
			key := artifacts.GraphResultKey(id, name)
			data, err := artifacts.ReadObject(gctx, store, key, artifacts.MaxJSONSize)
			switch {
			case errors.Is(err, artifacts.ErrNotExist):
				return nil
			case errors.Is(err, artifacts.ErrTooLarge):
				bad[i] = err.Error()
				return nil
			case err != nil:
				return fmt.Errorf("read the result of run %s graph %s: %w", id, name, err)
			}
			var res tuner.Result
			switch err := json.Unmarshal(data, &res); {
			case err != nil:
				bad[i] = fmt.Sprintf("%s: malformed JSON: %v", key, err)
			case res.Format != tuner.ResultFormat:
				bad[i] = fmt.Sprintf("%s: format %q, want %q", key, res.Format, tuner.ResultFormat)
			default:
				results[i] = &res
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, name := range r.Graphs {
		if results[i] != nil {
			r.Results[name] = results[i]
		}
		if bad[i] != "" {
			r.Unreadable[name] = bad[i]
		}
	}
	return r, nil
}

// Runs compares b with a, graph by graph, in a's graph order (then b's
// graphs a does not have).
func Runs(a, b *Run) Comparison {
	c := Comparison{A: a, B: b, SameBundle: a.BundleDigest != "" && a.BundleDigest == b.BundleDigest, MinGain: noise.MinGain, Graphs: []Graph{}}
	seen := map[string]bool{}
	var names []string
	for _, r := range []*Run{a, b} {
		for _, n := range r.Graphs {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		g := Graph{Name: n, A: side(a, n), B: side(b, n), Verdict: Missing}
		g.SameWinner = g.A.Winner != "" && g.A.Winner == g.B.Winner
		if len(g.A.costs) > 0 && len(g.B.costs) > 0 {
			// How much better b is than a: a's cost over b's.
			r := noise.CompareCosts(g.B.costs, g.A.costs, false)
			g.Ratio = &r
			g.Verdict = r.Move(noise.MinGain).String()
			if g.Verdict != WithinNoise {
				c.BeyondNoise++
			}
		}
		c.Graphs = append(c.Graphs, g)
	}
	return c
}

// side is a run's winner of a graph and its headline measurement.
func side(run *Run, graph string) Side {
	r := run.Results[graph]
	switch {
	case run.Unreadable[graph] != "":
		return Side{Status: "unreadable", Note: run.Unreadable[graph]}
	case r == nil && !slices.Contains(run.Graphs, graph):
		return Side{Status: "absent"}
	case r == nil:
		return Side{Status: "pending"}
	case r.Winner == nil || r.Winner.Index < 0 || r.Winner.Index >= len(r.Results):
		return Side{Status: "failed"}
	}
	s := Side{Status: "done", Winner: r.Winner.Candidate, Reused: r.Reused, Speedup: r.Winner.Speedup}
	st, ok := strategy.Headline(&r.Winner.Selection, r.Results[r.Winner.Index].Benchmarks)
	if !ok || st.SampleCostMs() <= 0 {
		return s
	}
	s.Headline, s.BatchSize, s.Rounds = st.Throughput, st.BatchSize, len(st.RoundMs)
	s.Lo, s.Hi, _ = st.ThroughputInterval()
	s.costs = st.RoundCosts()
	if len(s.costs) == 0 {
		// A measurement recorded without rounds: its one estimate.
		s.costs = []float64{st.SampleCostMs()}
	}
	// The figure every other view shows (the estimate the decision
	// used), not one recomputed here.
	s.Throughput = st.Throughput
	return s
}

// RatioText is a ratio for tables, "1.02× (0.97–1.07)", "—" for none.
func RatioText(r *noise.Ratio) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%s× (%s–%s)", strategy.RatioFigure(r.Value), strategy.RatioFigure(r.Lo), strategy.RatioFigure(r.Hi))
}
