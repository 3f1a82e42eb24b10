package fleet

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
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

// Check reports the first thing to fix in the fleet file, without
// opening bundles or reaching a service.
func (f *File) Check() error {
	_, err := f.Entries()
	return err
}

// Entries are the enabled models x their targets, higher priority first
// (then by model and target: the order is the file's digest's, not the
// map's). Their settings are checked here: a strategy, candidate or
// tolerance that does not parse, a duplicate model or target, a model
// without targets, each is an error naming the model's line.
func (f *File) Entries() ([]Entry, error) {
	fail := func(line int, format string, args ...any) ([]Entry, error) {
		return nil, &Error{Path: f.Path, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if f.Format != Format {
		return fail(0, "format is %q: want %q", f.Format, Format)
	}
	if len(f.Models) == 0 {
		return fail(0, "no models: list at least one under models:")
	}
	for _, c := range f.Classes {
		if err := jobs.CheckTarget(c); err != nil {
			return fail(0, "classes: %v", err)
		}
	}
	seen := map[string]int{}
	var out []Entry
	for _, m := range f.Models {
		if m.Model == "" {
			return fail(m.Line, "a model entry without model: (the bundle's model name)")
		}
		if first, dup := seen[m.Model]; dup {
			return fail(m.Line, "model %q is listed twice (first on line %d): one entry per model, with all its targets", m.Model, first)
		}
		seen[m.Model] = m.Line
		if m.Bundle == "" {
			return fail(m.Line, "model %q has no bundle: (a bundle directory or .tgz)", m.Model)
		}
		s := merge(f.Defaults, m.Settings)
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		opts, err := s.options()
		if err != nil {
			return fail(m.Line, "model %q: %v", m.Model, err)
		}
		if len(s.Targets) == 0 {
			return fail(m.Line, "model %q has no targets (set targets: under defaults or the model)", m.Model)
		}
		targets := map[string]bool{}
		path := m.Bundle
		if !filepath.IsAbs(path) && f.Path != "" && !bundlestore.IsRef(path) {
			path = filepath.Join(filepath.Dir(f.Path), path)
		}
		for _, t := range s.Targets {
			if err := jobs.CheckTarget(t); err != nil {
				return fail(m.Line, "model %q: %v", m.Model, err)
			}
			if targets[t] {
				return fail(m.Line, "model %q lists target %s twice", m.Model, t)
			}
			targets[t] = true
			o := opts
			o.Target = t
			prio := 0
			if s.Priority != nil {
				prio = *s.Priority
			}
			out = append(out, Entry{Model: m.Model, Bundle: path, Target: t, Priority: prio, Owners: s.Owners, Line: m.Line, Options: o})
		}
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

// CheckBackends checks every entry's candidates against the backends
// this build has (a candidate a backend does not know, a trt: one on the
// cpu class is caught by the caller), naming the model's line.
func (f *File) CheckBackends(es []Entry, reg backend.Registry) error {
	for _, e := range es {
		o := e.Options
		o.Backends = reg
		if err := o.Validate(); err != nil {
			return &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q target %s: %v", e.Model, e.Target, err)}
		}
	}
	return nil
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
