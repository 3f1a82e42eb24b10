package fleet

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/internal/suggest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/strategy"
)

// Entry is one model x target of a fleet, its settings resolved.
type Entry struct {
	Model    string
	Bundle   string // the bundle's path, resolved against the fleet file's directory
	Target   string
	Priority int
	Owners   []string
	Line     int // the model's entry in the fleet file
	// Options are the submission's, less what only the producer knows
	// (the backends to validate against, the nightly, the platforms).
	Options jobs.SubmitOptions
}

// Check reports every mistake in the fleet file (Problems), without
// opening bundles or reaching a service.
func (f *File) Check() error {
	_, err := f.Entries()
	return err
}

// Entries are the enabled models x their targets, higher priority first
// (then by model and target: the order is the file's digest's, not the
// map's). Their settings are checked here, all of them: a strategy,
// candidate, class or tolerance that does not parse, a duplicate model or
// target, a model without targets, each is a problem at the line that
// holds it (a mistake in defaults: once, at its line in defaults, not at
// each model that inherits it).
func (f *File) Entries() ([]Entry, error) {
	var probs Problems
	if f.Format != Format {
		probs = append(probs, f.at("format", "is %q: want %q", f.Format, Format))
	}
	if len(f.Models) == 0 {
		probs = append(probs, f.at("models", "no models: list at least one under models:"))
	}
	for _, c := range f.Classes {
		if err := jobs.CheckTarget(c); err != nil {
			probs = append(probs, f.at("classes", "%v", err))
		}
	}
	// The defaults' own mistakes, once.
	probs = append(probs, f.checkSettings(f.Defaults, "defaults.", func(k string) pos { return f.defaultsPos[k] })...)
	seen := map[string]int{}
	defaultsPaired := false // the defaults' strategy and budget disagree: said once
	var out []Entry
	for i, m := range f.Models {
		field := fmt.Sprintf("models[%d]", i)
		bad := func(key, format string, args ...any) {
			p, ok := m.pos[key]
			if !ok {
				p = pos{m.Line, 0}
			} else {
				field += "." + key
			}
			probs = append(probs, &Error{Path: f.Path, Line: p.line, Col: p.col, Field: field, Msg: fmt.Sprintf(format, args...)})
		}
		if m.Model == "" {
			bad("", "a model entry without model: (the bundle's model name)")
			continue
		}
		if first, dup := seen[m.Model]; dup {
			bad("model", "model %q is listed twice (first on line %d): one entry per model, with all its targets", m.Model, first)
			continue
		}
		seen[m.Model] = m.Line
		if m.Bundle == "" {
			bad("", "model %q has no bundle: (a bundle directory or .tgz)", m.Model)
		}
		own := f.checkSettings(m.Settings, field+".", func(k string) pos { return m.pos[k] })
		probs = append(probs, own...)
		s := merge(f.Defaults, m.Settings)
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		if len(s.Targets) == 0 && !slices.Contains(f.meant, "targets") {
			bad("", "model %q has no targets (set targets: under defaults or the model)", m.Model)
		}
		if len(s.Candidates) == 0 && !slices.Contains(f.meant, "candidates") {
			bad("", "model %q has no candidates (set candidates: under defaults or the model)", m.Model)
		}
		if name := orDefault(s.Strategy, DefaultStrategy); slices.Contains(strategy.Names(), name) {
			// The strategy and its budget go together: a pair that does not
			// is the model's to fix where it set either, else the defaults'.
			if _, err := strategy.Parse(name, s.LatencyBudgetMs); err != nil {
				switch {
				case m.LatencyBudgetMs != 0:
					bad("latency_budget_ms", "%v", err)
				case m.Strategy != "":
					bad("strategy", "%v", err)
				case !defaultsPaired:
					defaultsPaired = true
					p := f.defaultsPos["strategy"]
					if _, ok := f.defaultsPos["latency_budget_ms"]; ok {
						p = f.defaultsPos["latency_budget_ms"]
					}
					probs = append(probs, &Error{Path: f.Path, Line: p.line, Col: p.col, Field: "defaults", Msg: err.Error()})
				}
			}
		}
		if len(probs) > 0 {
			continue // no entries from a file with mistakes: only its problems
		}
		opts, err := s.options()
		if err != nil {
			bad("", "model %q: %v", m.Model, err)
			continue
		}
		path := m.Bundle
		if !filepath.IsAbs(path) && f.Path != "" && !bundlestore.IsRef(path) {
			path = filepath.Join(filepath.Dir(f.Path), path)
		}
		for _, t := range s.Targets {
			o := opts
			o.Target = t
			prio := 0
			if s.Priority != nil {
				prio = *s.Priority
			}
			out = append(out, Entry{Model: m.Model, Bundle: path, Target: t, Priority: prio, Owners: s.Owners, Line: m.Line, Options: o})
		}
	}
	if err := probs.orNil(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Target < out[j].Target
	})
	return out, nil
}

// checkSettings checks the settings one mapping sets itself (defaults, or
// a model's own), each problem at the line of the key that holds it.
func (f *File) checkSettings(s Settings, prefix string, at func(key string) pos) Problems {
	var probs Problems
	bad := func(key, format string, args ...any) {
		p := at(key)
		probs = append(probs, &Error{Path: f.Path, Line: p.line, Col: p.col, Field: prefix + key, Msg: fmt.Sprintf(format, args...)})
	}
	if s.Strategy != "" {
		if !slices.Contains(strategy.Names(), s.Strategy) {
			msg := fmt.Sprintf("unknown strategy %q", s.Strategy)
			if near := suggest.Closest(s.Strategy, strategy.Names(), 64); near != "" {
				msg += fmt.Sprintf("; did you mean %s?", near)
			} else {
				msg += fmt.Sprintf(" (want one of %s)", strings.Join(strategy.Names(), ", "))
			}
			bad("strategy", "%s", msg)
		}
	}
	for _, c := range s.Candidates {
		if _, err := backend.ParseCandidate(c); err != nil {
			bad("candidates", "%v", err)
		}
	}
	for _, set := range []struct {
		key  string
		vals []string
		rtol bool
	}{{"atol", s.ATol, false}, {"rtol", s.RTol, true}} {
		for _, v := range set.vals {
			if _, err := bundle.ParseToleranceOverride(v, set.rtol); err != nil {
				bad(set.key, "%v", err)
			}
		}
	}
	targets := map[string]bool{}
	for _, t := range s.Targets {
		if err := jobs.CheckTarget(t); err != nil {
			bad("targets", "%v", err)
			continue
		}
		if targets[t] {
			bad("targets", "lists target %s twice", t)
		}
		targets[t] = true
	}
	return probs
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// CheckBackends checks every entry's candidates against the backends
// this build has (a candidate a backend does not know, a trt: one on the
// cpu class is caught by the caller), naming the model's line.
func (f *File) CheckBackends(es []Entry, reg backend.Registry) error {
	var probs Problems
	said := map[string]bool{} // a model's candidates once, not once per target
	for _, e := range es {
		o := e.Options
		o.Backends = reg
		if err := o.Validate(); err != nil && !said[e.Model+err.Error()] {
			said[e.Model+err.Error()] = true
			probs = append(probs, &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q target %s: %v", e.Model, e.Target, err)})
		}
	}
	return probs.orNil()
}

// merge is the defaults overridden by a model's own settings, field by field.
func merge(d, m Settings) Settings {
	s := d
	if m.Targets != nil {
		s.Targets = m.Targets
	}
	if m.Strategy != "" {
		s.Strategy = m.Strategy
	}
	if m.LatencyBudgetMs != 0 {
		s.LatencyBudgetMs = m.LatencyBudgetMs
	}
	if m.Candidates != nil {
		s.Candidates = m.Candidates
	}
	if m.ATol != nil {
		s.ATol = m.ATol
	}
	if m.RTol != nil {
		s.RTol = m.RTol
	}
	if m.BenchTime != 0 {
		s.BenchTime = m.BenchTime
	}
	if m.CandidateTimeout != 0 {
		s.CandidateTimeout = m.CandidateTimeout
	}
	if m.Warmup != 0 {
		s.Warmup = m.Warmup
	}
	if m.FindMaxBatch != nil {
		s.FindMaxBatch = m.FindMaxBatch
	}
	if m.Priority != nil {
		s.Priority = m.Priority
	}
	if m.Owners != nil {
		s.Owners = m.Owners
	}
	if m.Enabled != nil {
		s.Enabled = m.Enabled
	}
	return s
}

// Defaults of a fleet's settings where neither defaults: nor the model
// says (those of producer submit).
const (
	DefaultStrategy         = strategy.MaxThroughput
	DefaultBenchTime        = 2 * time.Second
	DefaultCandidateTimeout = 30 * time.Minute
)

// options parses the settings into submit options (no target yet).
func (s Settings) options() (jobs.SubmitOptions, error) {
	name := s.Strategy
	if name == "" {
		name = DefaultStrategy
	}
	strat, err := strategy.Parse(name, s.LatencyBudgetMs)
	if err != nil {
		return jobs.SubmitOptions{}, err
	}
	if len(s.Candidates) == 0 {
		return jobs.SubmitOptions{}, fmt.Errorf("no candidates (set candidates: under defaults or the model)")
	}
	var cands []backend.Candidate
	for _, c := range s.Candidates {
		cand, err := backend.ParseCandidate(c)
		if err != nil {
			return jobs.SubmitOptions{}, err
		}
		cands = append(cands, cand)
	}
	var tol []bundle.ToleranceOverride
	for _, set := range []struct {
		vals []string
		rtol bool
	}{{s.ATol, false}, {s.RTol, true}} {
		for _, v := range set.vals {
			o, err := bundle.ParseToleranceOverride(v, set.rtol)
			if err != nil {
				return jobs.SubmitOptions{}, err
			}
			tol = append(tol, o)
		}
	}
	o := jobs.SubmitOptions{
		Strategy: strat, Candidates: cands, Tolerances: tol,
		BenchTime: DefaultBenchTime, CandidateTimeout: DefaultCandidateTimeout,
	}
	if s.BenchTime > 0 {
		o.BenchTime = time.Duration(s.BenchTime)
	}
	if s.CandidateTimeout > 0 {
		o.CandidateTimeout = time.Duration(s.CandidateTimeout)
	}
	if s.Warmup > 0 {
		o.Warmup = time.Duration(s.Warmup)
	}
	o.FindMaxBatch = s.FindMaxBatch != nil && *s.FindMaxBatch
	return o, nil
}
