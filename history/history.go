package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Format is the version of a history entry.
const Format = "tunefleet.history/v1"

// KeyTime is the layout of the time in an entry's key.
const KeyTime = "20060102T150405.000000000Z"

// Graph statuses in an entry.
const (
	GraphDone   = "done"
	GraphFailed = "failed"
)

// Entry is one finalized state of a model on a platform.
type Entry struct {
	Format   string `json:"format"`
	Model    string `json:"model"`
	Platform string `json:"platform"` // the platform key the state's engines are valid on
	Target   string `json:"target"`   // the target class the run was submitted for
	Run      string `json:"run"`
	Nightly  string `json:"nightly,omitempty"` // the nightly that submitted the run, if one did
	// Created is when the run was submitted: it orders the history (and
	// names the entry), as it orders latest.json.
	Created      time.Time `json:"created"`
	FinalizedAt  time.Time `json:"finalized_at"`
	Status       string    `json:"status"` // done | failed
	Reasons      []string  `json:"reasons,omitempty"`
	BundleDigest string    `json:"bundle_digest"`
	StateKey     string    `json:"state_key"`    // the content-addressed copy of state.json
	StateSHA256  string    `json:"state_sha256"` // its sha256 (64 hex)
	Device       string    `json:"device"`       // gpu | cpu: what the seconds below are of
	// SpentSeconds is the tuning time of the graphs this run tuned;
	// SavedSeconds what the graphs it reused had cost when they were tuned.
	SpentSeconds float64 `json:"spent_seconds"`
	SavedSeconds float64 `json:"saved_seconds"`
	// Settings are what the run was tuned with (absent in entries written
	// before they were recorded: no change of settings is seen then).
	Settings *Settings `json:"settings,omitempty"`
	// Remeasure says the run was asked to measure every graph again
	// (--remeasure) rather than reuse a result of the same work and
	// settings: its graphs are the same version, measured again.
	Remeasure bool    `json:"remeasure,omitempty"`
	Graphs    []Graph `json:"graphs"`
}

// Graph is one graph spec of an entry.
type Graph struct {
	Name      string `json:"name"`
	Status    string `json:"status"` // done | failed
	Candidate string `json:"candidate,omitempty"`
	Reused    bool   `json:"reused"`
	// Bench is the winner's measurement at the batch size it was selected
	// at (its best throughput when the selection names none).
	Bench *Bench `json:"bench,omitempty"`
	// Tied are the candidates the winner tied with within noise (itself
	// included) when its selection was a tie: a later entry won by any of
	// them is no change of winner.
	Tied    []string             `json:"tied,omitempty"`
	Failure *backend.FailureInfo `json:"failure,omitempty"`
	// Speedup is the winner's over the baseline candidate (absent when
	// either was not measured); ReusedFrom the run that measured a
	// reused graph.
	Speedup      *strategy.Speedup `json:"speedup,omitempty"`
	ReusedFrom   string            `json:"reused_from,omitempty"`
	SpentSeconds float64           `json:"spent_seconds"`
	SavedSeconds float64           `json:"saved_seconds"`
	// Digest is the digest of the graph's files (its ONNX graph, samples
	// and references) and Shapes its profile in words: the graph's
	// version. Two entries' figures of a graph are compared for a
	// regression only when both are the same (absent in entries written
	// before they were recorded: the bundle digest decides then).
	Digest string `json:"digest,omitempty"`
	Shapes string `json:"shapes,omitempty"`
}

// Bench is one measurement's figures and spread.
type Bench struct {
	BatchSize  int     `json:"batch_size"`
	Samples    int     `json:"samples"`
	Throughput float64 `json:"throughput"` // samples per second
	MeanMs     float64 `json:"mean_ms"`
	P50Ms      float64 `json:"p50_ms"`
	P90Ms      float64 `json:"p90_ms"`
	P99Ms      float64 `json:"p99_ms"`
	CV         float64 `json:"cv"`
	Stable     bool    `json:"stable"`
	// EstimateMs is the robust latency (outliers dropped) the decisions
	// use, RoundMs its value in each round of the measurement, Outliers
	// the calls dropped: what the noise rule compares two nights on.
	EstimateMs float64   `json:"estimate_ms,omitempty"`
	RoundMs    []float64 `json:"round_ms,omitempty"`
	Outliers   int       `json:"outliers,omitempty"`
	Short      bool      `json:"short,omitempty"`
	// UnstableCause is why an unstable measurement is
	// (backend.Stats.UnstableCause).
	UnstableCause string `json:"unstable_cause,omitempty"`
}

// Stats is the measurement as backend.Stats, for the noise rule.
func (b *Bench) Stats() backend.Stats {
	return backend.Stats{BatchSize: b.BatchSize, Samples: b.Samples, Throughput: b.Throughput, MeanMs: b.MeanMs, P50Ms: b.P50Ms,
		P90Ms: b.P90Ms, P99Ms: b.P99Ms, CV: b.CV, Stable: b.Stable, EstimateMs: b.EstimateMs, RoundMs: b.RoundMs, Outliers: b.Outliers, Short: b.Short,
		UnstableCause: b.UnstableCause}
}

// Prefix is where a model's history on a platform lives.
func Prefix(model, platform string) string {
	return "models/" + model + "/" + platform + "/history/"
}

// Key is where an entry lives.
func Key(model, platform string, created time.Time, run string) string {
	return Prefix(model, platform) + created.UTC().Format(KeyTime) + "-" + run + ".json"
}

// Key is the entry's own key.
func (e *Entry) Key() string { return Key(e.Model, e.Platform, e.Created, e.Run) }

// FromState builds the entry of a finalized state. results are the
// graphs' results by name (they carry reuse and tuning time); stateRef is
// the content-addressed copy of the state's bytes; nightly is the nightly
// id of the run, if any.
func FromState(ms *state.State, results map[string]*tuner.Result, stateRef artifacts.Ref, nightly string) *Entry {
	var t Tally
	var graphs []Graph
	for _, sg := range ms.Graphs {
		graphs = append(graphs, t.Graph(sg, results[sg.Name]))
	}
	e := t.Entry(ms, stateRef, nightly)
	e.Graphs = append(e.Graphs, graphs...)
	return e
}

// Tally builds an entry a graph at a time, for a finalize that writes the
// entry's graphs as it goes (jsondoc) rather than holding them: Graph is
// each graph's part, Entry the rest, with what it sums over the graphs.
type Tally struct {
	spent, saved float64
	toolchain    map[string]string
}

// Graph is the entry's part for one graph of the state, in the state's
// order; r is its result (nil: none).
func (t *Tally) Graph(sg state.StateGraph, r *tuner.Result) Graph {
	g := Graph{Name: sg.Name, Status: GraphDone, Candidate: sg.Candidate, Failure: sg.Failure, Shapes: ShapesText(sg.Profile)}
	if sg.Selection.IsTie() {
		g.Tied = sg.Selection.Tied
	}
	if sg.Selection != nil {
		g.Speedup = sg.Selection.Speedup
	}
	if sg.Failure != nil || sg.Engine == nil {
		g.Status = GraphFailed
	}
	if r != nil {
		g.Reused, g.ReusedFrom = r.Reused, r.ReusedFrom
		if len(r.Inputs) > 0 {
			g.Digest = bundle.DigestOf(r.Inputs)
		}
		secs := r.Duration.Seconds()
		if r.Reused {
			g.SavedSeconds = secs // what it had cost when it was tuned
		} else {
			g.SpentSeconds = secs
		}
		t.addToolchain(r)
	}
	if g.Status == GraphDone {
		g.Bench = headline(sg)
	}
	t.spent += g.SpentSeconds
	t.saved += g.SavedSeconds
	return g
}

// Entry is the entry of the finalized state ms with the graphs counted so
// far, without them: Graphs is empty (not nil).
func (t *Tally) Entry(ms *state.State, stateRef artifacts.Ref, nightly string) *Entry {
	return &Entry{
		Format: Format, Model: ms.Model, Platform: ms.Platform, Target: ms.Target, Run: ms.Run, Nightly: nightly,
		Created: ms.Provenance.SubmittedAt.UTC(), FinalizedAt: ms.Provenance.FinalizedAt.UTC(), Status: ms.Status,
		Reasons: ms.Reasons, BundleDigest: ms.Provenance.BundleDigest, StateKey: stateRef.Key(), StateSHA256: stateRef.SHA256,
		Device: deviceOf(ms.Target), Settings: t.settings(ms), Graphs: []Graph{},
		SpentSeconds: t.spent, SavedSeconds: t.saved,
	}
}

// ShapesText is a profile's ranges in words, an input a part, as
// --shapes takes them ("input:1x16..4x16"), "" for none.
func ShapesText(p shapes.Profile) string {
	parts := make([]string, 0, len(p.Inputs))
	for _, in := range p.Inputs {
		r := shapes.FormatShape(in.Min)
		if !slices.Equal(in.Max, in.Min) {
			r += ".." + shapes.FormatShape(in.Max)
		}
		parts = append(parts, in.Name+":"+r)
	}
	return strings.Join(parts, " ")
}

// deviceOf says what a target class spends: a cpu class CPU seconds,
// every other class (gpu.h100, …) GPU seconds.
func deviceOf(target string) string {
	if target == "cpu" || strings.HasPrefix(target, "cpu.") {
		return "cpu"
	}
	return "gpu"
}

// headline is the winner's measurement at the batch size it was selected
// at, else its best throughput.
func headline(sg state.StateGraph) *Bench { return BenchOf(sg.Selection, sg.Benchmarks) }

// BenchOf is a winner's headline measurement (strategy.Headline: the one
// at the batch size sel names, else its best throughput; nil when nothing
// was measured). Every table and page that prints a winner's figure
// prints this one, so that they agree.
func BenchOf(sel *strategy.Selection, benchmarks []backend.Stats) *Bench {
	st, ok := strategy.Headline(sel, benchmarks)
	if !ok {
		return nil
	}
	return &Bench{BatchSize: st.BatchSize, Samples: st.Samples, Throughput: st.Throughput, MeanMs: st.MeanMs,
		P50Ms: st.P50Ms, P90Ms: st.P90Ms, P99Ms: st.P99Ms, CV: st.CV, Stable: st.Stable,
		EstimateMs: st.EstimateMs, RoundMs: st.RoundMs, Outliers: st.Outliers, Short: st.Short, UnstableCause: st.UnstableCause}
}

// ResultBench is BenchOf a result's winner (nil without one).
func ResultBench(r *tuner.Result) *Bench {
	if r == nil || r.Winner == nil || r.Winner.Index < 0 || r.Winner.Index >= len(r.Results) {
		return nil
	}
	return BenchOf(&r.Winner.Selection, r.Results[r.Winner.Index].Benchmarks)
}

// Append writes the entry at its key unless an entry is there already:
// entries are written once, never rewritten (a repeated finalize of the
// run finds its entry). written tells whether this call wrote it. A store
// that can write conditionally (artifacts.Creator: S3, a local directory)
// does it in one request; for another, two callers racing must hold a lock
// around Append (finalize holds one in Redis).
func Append(ctx context.Context, store artifacts.Store, e *Entry) (written bool, err error) {
	return AppendAt(ctx, store, e.Key(), e)
}

// AppendAt is Append at another key than the entry's own: finalize also
// files an entry under the run's target class (its Platform stays the
// platform key it ran on), as latest.json is.
func AppendAt(ctx context.Context, store artifacts.Store, key string, e *Entry) (written bool, err error) {
	if err := artifacts.CheckKey(key); err != nil {
		return false, fmt.Errorf("history entry of run %s: %w", e.Run, err)
	}
	// A copy: finalize writes one entry under two keys at once.
	c := *e
	c.Format = cmp.Or(c.Format, Format)
	// Written once: where the entry is there (a repeated finalize), it
	// stays as it was.
	written, err = artifacts.PutNewJSON(ctx, store, key, &c)
	if err != nil {
		return false, fmt.Errorf("write history entry %s: %w", key, err)
	}
	return written, nil
}

// AppendEncodedAt is AppendAt of an entry already encoded as AppendAt
// encodes it, size bytes that r reads (finalize writes a large run's entry
// a graph at a time, to a file: history.Tally and jsondoc); run names the
// entry in errors.
func AppendEncodedAt(ctx context.Context, store artifacts.Store, key, run string, r io.Reader, size int64) (written bool, err error) {
	if err := artifacts.CheckKey(key); err != nil {
		return false, fmt.Errorf("history entry of run %s: %w", run, err)
	}
	written, err = artifacts.PutNewFrom(ctx, store, key, r, size)
	if err != nil {
		return false, fmt.Errorf("write history entry %s: %w", key, err)
	}
	return written, nil
}

// Keys lists the entry keys of a model on a platform, oldest first.
func Keys(ctx context.Context, store artifacts.Store, model, platform string) ([]string, error) {
	prefix := Prefix(model, platform)
	if err := artifacts.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	all, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list the history of %s on %s: %w", model, platform, err)
	}
	var keys []string
	for _, k := range all {
		if m, p, ok := entryKey(k); ok && m == model && p == platform {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // the time leads the name, in a fixed-width layout
	return keys, nil
}

// KeysByModel lists, in one listing, the entry keys under prefix
// ("models/" for every model, "models/<model>/" for one) by model and
// platform, each platform's oldest first as Keys gives them: what a page
// over many models' histories reads instead of a listing per model and
// platform.
func KeysByModel(ctx context.Context, store artifacts.Store, prefix string) (map[string]map[string][]string, error) {
	all, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", prefix, store, err)
	}
	out := map[string]map[string][]string{}
	for _, k := range all {
		m, p, ok := entryKey(k)
		if !ok {
			continue
		}
		if out[m] == nil {
			out[m] = map[string][]string{}
		}
		out[m][p] = append(out[m][p], k)
	}
	for _, ps := range out {
		for _, ks := range ps {
			sort.Strings(ks)
		}
	}
	return out, nil
}

// entryKey reports whether key is an entry's
// (models/<model>/<platform>/history/<time>-<run>.json) and whose.
func entryKey(key string) (model, platform string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || parts[0] != "models" || parts[3] != "history" || RunOf(key) == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// Read reads one entry.
func Read(ctx context.Context, store artifacts.Store, key string) (*Entry, error) {
	var e Entry
	if err := artifacts.GetJSON(ctx, store, key, &e); err != nil {
		return nil, fmt.Errorf("read history entry %s: %w", key, err)
	}
	if e.Format != Format {
		return nil, fmt.Errorf("history entry %s: format %q, want %q", key, e.Format, Format)
	}
	return &e, nil
}

// List reads a model's history on a platform, oldest first; limit > 0
// keeps only the newest limit entries: read through the head, not the
// listing, when it names that many (`producer history --limit`).
func List(ctx context.Context, store artifacts.Store, model, platform string, limit int) ([]*Entry, error) {
	var keys []string
	var err error
	if limit > 0 && limit <= HeadDepth {
		keys, err = Recent(ctx, store, model, platform, limit)
	}
	if err == nil && (limit <= 0 || limit > HeadDepth || len(keys) < limit) {
		// The whole history asked for, or a head that names fewer entries
		// than asked (it may not be the whole history): the listing.
		keys, err = Keys(ctx, store, model, platform)
	}
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(keys) > limit {
		keys = keys[len(keys)-limit:]
	}
	out := make([]*Entry, 0, len(keys))
	for _, k := range keys {
		e, err := Read(ctx, store, k)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// RunOf is the run an entry key names ("" for a key of another shape).
func RunOf(key string) string {
	name := key[strings.LastIndex(key, "/")+1:]
	n := len(KeyTime)
	if len(name) <= n+1+len(".json") || name[n] != '-' || !strings.HasSuffix(name, ".json") {
		return ""
	}
	return strings.TrimSuffix(name[n+1:], ".json")
}

// ErrNoEntry is returned (wrapped) when a run has no history entry (yet).
var ErrNoEntry = errors.New("no history entry")

// Find reads a run's entry and the entry it is compared with (the one
// before it of the same target class; nil when it is the first) in a
// model's history on a platform.
func Find(ctx context.Context, store artifacts.Store, model, platform, run string) (cur, prev *Entry, err error) {
	keys, err := Keys(ctx, store, model, platform)
	if err != nil {
		return nil, nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if RunOf(keys[i]) == run {
			return readCompared(ctx, store, keys, i, 0)
		}
	}
	return nil, nil, fmt.Errorf("%w for run %s of %s on %s", ErrNoEntry, run, model, platform)
}

// Newest reads the newest entry of keys (one model's on one platform,
// oldest first, as Keys lists them) and the entry it is compared with,
// looking back at most depth entries for it (0: as far as keys go).
func Newest(ctx context.Context, store artifacts.Store, keys []string, depth int) (cur, prev *Entry, err error) {
	if len(keys) == 0 {
		return nil, nil, ErrNoEntry
	}
	return readCompared(ctx, store, keys, len(keys)-1, depth)
}

// readCompared reads keys[i] and the nearest entry before it of the same
// target class, within depth entries (0: any): a platform that serves two
// classes holds both classes' runs, which were tuned and measured apart
// (their work keys differ).
func readCompared(ctx context.Context, store artifacts.Store, keys []string, i, depth int) (cur, prev *Entry, err error) {
	if cur, err = Read(ctx, store, keys[i]); err != nil {
		return nil, nil, err
	}
	for j := i - 1; j >= 0 && (depth <= 0 || j >= i-depth); j-- {
		e, err := Read(ctx, store, keys[j])
		if err != nil {
			return nil, nil, err
		}
		if e.Target == cur.Target {
			return cur, e, nil
		}
	}
	return cur, nil, nil
}

// Previous is the entry list[i] is compared with: the nearest one before it
// of the same target class (nil for the first). A platform that serves two
// classes holds both classes' runs in one history; each class's runs were
// tuned and measured apart.
func Previous(list []*Entry, i int) *Entry {
	for j := i - 1; j >= 0; j-- {
		if list[j].Target == list[i].Target {
			return list[j]
		}
	}
	return nil
}
