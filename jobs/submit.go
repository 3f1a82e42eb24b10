package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/version"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Client submits and inspects runs.
type Client struct {
	rdb   redis.UniversalClient
	store artifacts.Store
	runs  *Runs
	q     *asynq.Client
}

// NewClient builds a client over a Redis connection and a store. Close it
// to release the queue client (the Redis connection stays the caller's).
func NewClient(rdb redis.UniversalClient, store artifacts.Store) *Client {
	return &Client{rdb: rdb, store: store, runs: NewRuns(rdb), q: asynq.NewClientFromRedisClient(rdb)}
}

// Close releases the queue client.
func (c *Client) Close() error { return c.q.Close() }

// Runs gives access to the run bookkeeping.
func (c *Client) Runs() *Runs { return c.runs }

// SubmitOptions say how a bundle is to be tuned.
type SubmitOptions struct {
	Target           string
	Strategy         strategy.Strategy
	Candidates       []backend.Candidate
	Backends         backend.Registry // to validate candidates; nothing is built here
	Force            bool             // a new run even if this one was submitted before
	BenchTime        time.Duration
	CandidateTimeout time.Duration
	Command          []string
	// Tolerances override the bundle's own correctness tolerances for this
	// run (--atol/--rtol); they make it another run than the same bundle
	// submitted without them.
	Tolerances []bundle.ToleranceOverride
	// Nightly is the nightly submitting the run: recorded in run.json and
	// copied into the run's history entry (it does not change the run id).
	Nightly string
}

// Submission is what Submit did.
type Submission struct {
	Run      string `json:"run"`
	Model    string `json:"model"`
	Created  bool   `json:"created"`  // false: the same run was submitted before
	Graphs   int    `json:"graphs"`   // graphs in the run
	Enqueued int    `json:"enqueued"` // tune:graph tasks enqueued by this call
	// Status is the run's status when it was submitted before (running,
	// done or failed); a failed run is only tuned again with Force.
	Status string `json:"status,omitempty"`
	// Restored is set when Redis had lost the run and this call rebuilt
	// its record from the store before enqueuing what was pending.
	Restored bool `json:"restored,omitempty"`
}

// Validate checks options before anything is uploaded.
func (o SubmitOptions) Validate() error {
	if err := CheckTarget(o.Target); err != nil {
		return err
	}
	opts := tuner.Options{Backends: o.Backends, Strategy: o.Strategy, Candidates: o.Candidates}
	return opts.Validate()
}

// Submit uploads the bundle's files as blobs, writes run.json, records the
// run and enqueues one tune:graph task per graph. Submitting the same run
// again enqueues nothing. Incremental reuse happens in the worker, which
// alone knows the platform a result must match (a target class may be
// served by machines of several platforms).
func (c *Client) Submit(ctx context.Context, b *bundle.Bundle, o SubmitOptions) (Submission, error) {
	if err := o.Validate(); err != nil {
		return Submission{}, err
	}
	if _, err := aitune.ParseBlock(b.Manifest.AITune, b.Manifest); err != nil {
		return Submission{}, fmt.Errorf("bundle %s: %w", b.Dir, err)
	}
	if o.BenchTime == 0 {
		o.BenchTime = backend.DefaultStopRule().MaxTime
	}
	if o.CandidateTimeout == 0 {
		o.CandidateTimeout = 30 * time.Minute
	}
	// Every file is hashed once: the digest, the uploads and the work keys
	// all come from this list.
	files, err := b.Files()
	if err != nil {
		return Submission{}, err
	}
	digest := bundle.DigestOf(files)
	cands := make([]string, len(o.Candidates))
	for i, cand := range o.Candidates {
		cands[i] = cand.String()
	}
	salt := ""
	if o.Force {
		salt = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	m, err := withTolerances(b.Manifest, o.Tolerances)
	if err != nil {
		return Submission{}, fmt.Errorf("bundle %s: %w", b.Dir, err)
	}
	for _, t := range o.Tolerances {
		salt += "\x00" + t.String()
	}
	run := RunID(m.Model, digest, o.Target, o.Strategy.Name(), o.Strategy.LatencyBudgetMs(), cands, salt)
	sub := Submission{Run: run, Model: m.Model, Graphs: len(m.Graphs)}

	existing, err := c.runs.Get(ctx, run)
	if errors.Is(err, ErrNoRun) {
		// Submitted before, and Redis lost it (run.json is in the store):
		// rebuild its record rather than start it again from attempt 1,
		// which would overwrite the stored attempts' results.
		restored, rerr := Restore(ctx, c.runs, c.store, run)
		switch {
		case rerr == nil && restored:
			existing, err = c.runs.Get(ctx, run)
			sub.Restored = true
		case rerr != nil && !errors.Is(rerr, ErrNoRun):
			return Submission{}, rerr
		}
	}
	switch {
	case err == nil:
		sub.Status = existing.Status
		// The same run: enqueue only what is still pending and has no task
		// (a submission that died half-way is completed; anything else is
		// a no-op thanks to the task IDs).
		sub.Enqueued, err = c.enqueuePending(ctx, run, nil, existing.GraphNames())
		if err == nil && !existing.Final() && existing.Done+existing.Failed+existing.Cancelled == existing.Total {
			// Every graph finished but finalize never ran (its enqueue
			// was lost): submitting again repairs the run.
			err = enqueueFinalize(ctx, c.runs, c.q, run, existing.Target)
		}
		return sub, err
	case !errors.Is(err, ErrNoRun):
		return Submission{}, err
	}

	spec := RunSpec{
		Format: RunFormat, Run: run, Model: m.Model, Target: o.Target, BundleDigest: digest, Manifest: m,
		Files: map[string]artifacts.Ref{}, Strategy: o.Strategy.Name(), LatencyBudgetMs: o.Strategy.LatencyBudgetMs(),
		Candidates: cands, BenchTime: o.BenchTime, CandidateTime: o.CandidateTimeout, WorkKeys: map[string]string{},
		SubmittedAt: time.Now().UTC(), SubmittedBy: hostname(), Command: o.Command, Tunefleet: version.String(),
		Nightly: o.Nightly,
	}
	byPath := map[string]bundle.FileDigest{}
	// The files go up several at once: most are small, so a sequential
	// loop spends its time in round trips. The first failure stops the rest.
	blobs := make([]artifacts.FileBlob, 0, len(files))
	for _, f := range files {
		byPath[f.Path] = f
		ref := artifacts.Ref{SHA256: f.SHA256, Size: f.Size}
		blobs = append(blobs, artifacts.FileBlob{Path: filepath.Join(b.Dir, filepath.FromSlash(f.Path)), Ref: ref})
		spec.Files[f.Path] = ref
	}
	if err := artifacts.PutFiles(ctx, c.store, blobs, artifacts.DefaultPutConcurrency); err != nil {
		return Submission{}, fmt.Errorf("upload bundle files: %w", err)
	}
	var graphs []string
	for _, g := range m.Graphs {
		var gf []bundle.FileDigest
		for _, p := range g.Paths() {
			gf = append(gf, byPath[p])
		}
		sort.Slice(gf, func(i, j int) bool { return gf[i].Path < gf[j].Path })
		gf = slices.CompactFunc(gf, func(a, b bundle.FileDigest) bool { return a.Path == b.Path })
		// The declaration and the graph's explicit dynamic shapes decide
		// its profile and batch sizes, so they are part of the work.
		decl, _ := jsonString(g)
		dyn, _ := jsonString(graphDynamicShapes(m, g))
		spec.WorkKeys[g.Name] = WorkKey(bundle.DigestOf(gf)+"\x00"+decl+"\x00"+dyn, o.Target, spec.Strategy, spec.LatencyBudgetMs, cands, tuner.ResultFormat)
		graphs = append(graphs, g.Name)
	}
	if err := artifacts.PutJSON(ctx, c.store, artifacts.RunKey(run), spec); err != nil {
		return Submission{}, fmt.Errorf("write run.json: %w", err)
	}
	created, err := c.runs.Create(ctx, run, m.Model, o.Target, graphs)
	if err != nil {
		return Submission{}, err
	}
	sub.Created = created
	if !created { // a concurrent submit of the same run won the race
		return sub, nil
	}
	sub.Enqueued, err = c.enqueuePending(ctx, run, &spec, graphs)
	return sub, err
}

// enqueuePending enqueues the tasks of the run's graphs that are still
// pending; a task whose ID exists already is left alone.
func (c *Client) enqueuePending(ctx context.Context, run string, spec *RunSpec, graphs []string) (int, error) {
	if spec == nil { // a run submitted before: its run.json says how
		spec = &RunSpec{}
		if err := artifacts.GetJSON(ctx, c.store, artifacts.RunKey(run), spec); err != nil {
			return 0, fmt.Errorf("read run.json of %s: %w", run, err)
		}
	}
	// One read of the pending set, not a round trip per graph.
	pending, err := c.runs.rdb.SMembers(ctx, pendingKey(run)).Result()
	if err != nil {
		return 0, fmt.Errorf("read run %s: %w", run, err)
	}
	isPending := make(map[string]bool, len(pending))
	for _, g := range pending {
		isPending[g] = true
	}
	n := 0
	for _, g := range graphs {
		if !isPending[g] {
			continue
		}
		task, opts, err := newGraphTask(GraphPayload{V: PayloadVersion, Run: run, Graph: g, WorkKey: spec.WorkKeys[g]},
			spec.Target, spec.CandidateTime, len(spec.Candidates))
		if err != nil {
			return n, err
		}
		_, err = c.q.EnqueueContext(ctx, task, opts...)
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("enqueue graph %s of run %s: %w", g, run, err)
		}
		n++
	}
	return n, nil
}

// withTolerances is m with the overrides applied, m itself untouched (its
// graphs and their tolerance maps are copied first).
func withTolerances(m bundle.Manifest, overrides []bundle.ToleranceOverride) (bundle.Manifest, error) {
	if len(overrides) == 0 {
		return m, nil
	}
	m.Graphs = slices.Clone(m.Graphs)
	for i := range m.Graphs {
		if t := m.Graphs[i].Tolerances; t != nil {
			m.Graphs[i].Tolerances = maps.Clone(t)
		}
	}
	return m, bundle.ApplyTolerances(&m, overrides)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// graphDynamicShapes are the explicit dynamic shapes of a graph's inputs.
func graphDynamicShapes(m bundle.Manifest, g bundle.Graph) map[string][]shapes.Dim {
	out := map[string][]shapes.Dim{}
	for _, in := range g.Inputs {
		if d, ok := m.DynamicShapes[in.Name]; ok {
			out[in.Name] = d
		}
	}
	return out
}
