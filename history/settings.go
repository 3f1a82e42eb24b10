package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// Settings are what a run was tuned with besides its bundle: when two
// entries' settings differ, what moved between them is the settings'
// doing as much as the model's, and Compare says "settings changed"
// instead of "slower" or "newly failing".
type Settings struct {
	Strategy        string   `json:"strategy"`
	LatencyBudgetMs float64  `json:"latency_budget_ms,omitempty"`
	Candidates      []string `json:"candidates"`
	// Tolerances is a short digest of the graphs' correctness tolerances
	// as the run checked them (the bundle's, with any overrides); "" none.
	Tolerances string `json:"tolerances,omitempty"`
	// ToleranceValues are the tolerances the digest covers, by graph and
	// output: what a change of them shows, value by value. Absent in
	// entries from before they were kept (the digest alone is compared).
	ToleranceValues map[string]map[string]bundle.Tolerance `json:"tolerance_values,omitempty"`
	// Bench is the measurement settings in words (bench time, warm-up).
	Bench string `json:"bench,omitempty"`
	// Toolchain are the versions the winners were built with
	// (ort_version, trt_version, …), from their results.
	Toolchain map[string]string `json:"toolchain,omitempty"`
}

// settings are the settings a state's provenance and its graphs'
// results (those counted) record.
func (t *Tally) settings(ms *state.State) *Settings {
	s := &Settings{Strategy: ms.Provenance.Strategy, LatencyBudgetMs: ms.Provenance.LatencyBudgetMs,
		Candidates: slices.Clone(ms.Provenance.Candidates), Toolchain: maps.Clone(t.toolchain)}
	if s.Candidates == nil {
		s.Candidates = []string{}
	}
	return s
}

// addToolchain counts the versions a graph's winner was built with (a
// version two winners disagree on: the later graph's).
func (t *Tally) addToolchain(r *tuner.Result) {
	if r.Winner == nil || r.Winner.Index < 0 || r.Winner.Index >= len(r.Results) {
		return
	}
	for k, v := range r.Results[r.Winner.Index].Info {
		if strings.HasSuffix(k, "_version") && v != "" {
			if t.toolchain == nil {
				t.toolchain = map[string]string{}
			}
			t.toolchain[k] = v
		}
	}
}

// WithRun adds to the entry's settings what only the run's submission
// knows: the tolerances its graphs were checked with, its bench settings
// and whether it was asked to measure again (--remeasure). finalize calls
// it with run.json's.
func (e *Entry) WithRun(graphs []bundle.Graph, benchTime, warmup time.Duration, remeasure bool) *Entry {
	e.Remeasure = remeasure
	if e.Settings == nil {
		e.Settings = &Settings{Candidates: []string{}}
	}
	tol := map[string]map[string]bundle.Tolerance{}
	for _, g := range graphs {
		if len(g.Tolerances) > 0 {
			tol[g.Name] = g.Tolerances
		}
	}
	if len(tol) > 0 {
		data, _ := json.Marshal(tol) // maps marshal in key order
		sum := sha256.Sum256(data)
		e.Settings.Tolerances = hex.EncodeToString(sum[:])[:12]
		e.Settings.ToleranceValues = tol
	}
	var bench []string
	if benchTime > 0 {
		bench = append(bench, "bench time "+benchTime.String())
	}
	if warmup > 0 {
		bench = append(bench, "warm-up "+warmup.String())
	}
	e.Settings.Bench = strings.Join(bench, ", ")
	return e
}

// benchDiff starts SettingsDiff's part for the bench settings.
const benchDiff = "bench settings "

// SettingsDiff says what differs between two entries' settings, a part
// per setting ("candidates a,b → c"); nil when they agree or either entry
// predates settings being recorded (nothing is known to have changed).
func SettingsDiff(prev, cur *Settings) []string {
	if prev == nil || cur == nil {
		return nil
	}
	var out []string
	or := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	if prev.Strategy != cur.Strategy || prev.LatencyBudgetMs != cur.LatencyBudgetMs {
		out = append(out, fmt.Sprintf("strategy %s → %s", strategyText(prev), strategyText(cur)))
	}
	if !slices.Equal(prev.Candidates, cur.Candidates) {
		out = append(out, fmt.Sprintf("candidates %s → %s", or(strings.Join(prev.Candidates, ",")), or(strings.Join(cur.Candidates, ","))))
	}
	if prev.Tolerances != cur.Tolerances {
		out = append(out, toleranceDiff(prev, cur, or))
	}
	if prev.Bench != cur.Bench {
		out = append(out, fmt.Sprintf(benchDiff+"%s → %s", or(prev.Bench), or(cur.Bench)))
	}
	// A toolchain only where both name a version: a failed graph has no
	// winner to name one.
	for _, k := range slices.Sorted(maps.Keys(cur.Toolchain)) {
		if p, ok := prev.Toolchain[k]; ok && p != cur.Toolchain[k] {
			out = append(out, fmt.Sprintf("toolchain %s %s → %s", strings.TrimSuffix(k, "_version"), p, cur.Toolchain[k]))
		}
	}
	return out
}

func strategyText(s *Settings) string {
	if s.LatencyBudgetMs > 0 {
		return fmt.Sprintf("%s (%g ms)", s.Strategy, s.LatencyBudgetMs)
	}
	return s.Strategy
}

// toleranceDiff says how the tolerances changed, value by value
// ("tolerances graph 0 output y atol 1e-05 → 0.001"), where both entries
// kept their values; else the digests (an entry from before values were
// kept).
func toleranceDiff(prev, cur *Settings, or func(string) string) string {
	if (prev.Tolerances != "" && prev.ToleranceValues == nil) || (cur.Tolerances != "" && cur.ToleranceValues == nil) {
		return fmt.Sprintf("tolerances %s → %s (digests: an entry predates the values being kept)", or(prev.Tolerances), or(cur.Tolerances))
	}
	num := func(v *float64) string {
		if v == nil {
			return "default"
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	var parts []string
	for _, g := range unionKeys(prev.ToleranceValues, cur.ToleranceValues) {
		p, c := prev.ToleranceValues[g], cur.ToleranceValues[g]
		for _, o := range unionKeys(p, c) {
			var moved []string
			if a, b := num(p[o].ATol), num(c[o].ATol); a != b {
				moved = append(moved, "atol "+a+" → "+b)
			}
			if a, b := num(p[o].RTol), num(c[o].RTol); a != b {
				moved = append(moved, "rtol "+a+" → "+b)
			}
			if len(moved) > 0 {
				parts = append(parts, fmt.Sprintf("graph %s output %s %s", g, o, strings.Join(moved, ", ")))
			}
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("tolerances %s → %s", or(prev.Tolerances), or(cur.Tolerances))
	}
	return "tolerances " + strings.Join(parts, "; ")
}

// unionKeys is the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
