package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/version"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Client submits and inspects runs.
type Client struct {
	rdb   redis.UniversalClient
	store artifacts.Store
	runs  *runstate.Runs
	q     *queueClient
	// signer signs the provenance of the runs this client finalizes
	// itself (SetSigner).
	signer *provenance.Signer
	// workDir is where those finalizes spool (SetWorkDir; "": the
	// system's temporary directory); orphans removes, once, the scratch
	// that processes gone left there.
	workDir string
	orphans sync.Once
}

// SetWorkDir sets where the runs this client finalizes itself (every graph
// reused, finalized by Submit) spool their outputs past a megabyte
// (default: the system's temporary directory). Before the first such
// finalize, the scratch directories that processes no longer running left
// there are removed (a producer killed while finalizing leaves its spools).
func (c *Client) SetWorkDir(dir string) { c.workDir = dir }

// NewClient builds a client over a Redis connection and a store. Close it
// to release the queue client (the Redis connection stays the caller's).
func NewClient(rdb redis.UniversalClient, store artifacts.Store) *Client {
	return &Client{rdb: rdb, store: store, runs: runstate.NewRuns(rdb), q: newQueueClient(rdb)}
}

// Close releases the queue client.
func (c *Client) Close() error { return c.q.Close() }

// Runs gives access to the run bookkeeping.
func (c *Client) Runs() *runstate.Runs { return c.runs }

// SubmitOptions say how a bundle is to be tuned.
type SubmitOptions struct {
	Target     string
	Strategy   strategy.Strategy
	Candidates []backend.Candidate
	Backends   backend.Registry // to validate candidates; nothing is built here
	Force      bool             // a new run even if this one was submitted before
	// Remeasure makes a new run (as Force does) that measures every graph
	// again instead of reusing an indexed result of the same work and
	// settings; its results supersede the indexed ones.
	Remeasure        bool
	BenchTime        time.Duration
	Warmup           time.Duration // longest warm-up of a measurement; 0: a quarter of BenchTime
	CandidateTimeout time.Duration
	Command          []string
	// Tolerances override the bundle's own correctness tolerances for this
	// run (--atol/--rtol); they make it another run than the same bundle
	// submitted without them.
	Tolerances []bundle.ToleranceOverride
	// RetryFailed builds the candidates the negative cache would skip (a
	// deterministic failure on the same work, platform and toolchain). It
	// makes another run than the same bundle submitted without it.
	RetryFailed bool
	// Nightly is the nightly id a fleet's nightly submits under: it makes
	// the run another than the same bundle submitted another night (each
	// night has its own run, state.json and history), and is recorded in
	// run.json.
	Nightly string
	// ReuseFrom are the platforms that served the target recently (the
	// worker registry). A graph whose result is indexed for every one of
	// them is completed by Submit from the index instead of enqueued, the
	// run being bound to the first; a run whose every graph is so reused
	// is finalized by Submit itself, with no task at all. Empty: every
	// graph is enqueued (the worker reuses what its platform has).
	ReuseFrom []string
	// FindMaxBatch runs AITune's find-max-batch-size step on every graph
	// before its candidates are built (tuner.Options.FindMaxBatch). It
	// makes another run, and other work, than the same bundle without it.
	FindMaxBatch bool
	// Hold builds the tasks of the graphs left to tune but does not
	// enqueue them: they are returned in Submission.Held, for the caller
	// to enqueue (Client.EnqueueHeld) in an order of its own (the nightly
	// enqueues a class's graphs longest first across every model). A
	// caller that dies before enqueuing them loses nothing: submitting the
	// same run again finds its graphs pending and holds them again.
	Hold bool
	// Baseline is the candidate each winner's speedup is measured
	// against ("" : the least optimized, strategy.DefaultBaseline). It is
	// a report's choice, not the measurement's: it is no part of the work
	// key, and a reused result keeps the baseline it was measured with.
	Baseline string
}

// Submission is what Submit did.
type Submission struct {
	Run   string `json:"run"`
	Model string `json:"model"`
	// BundleDigest is the digest of the bundle's files (run.json's).
	BundleDigest string `json:"bundle_digest,omitempty"`
	Created      bool   `json:"created"`  // false: the same run was submitted before
	Graphs       int    `json:"graphs"`   // graphs in the run
	Enqueued     int    `json:"enqueued"` // tune:graph tasks enqueued by this call
	// Reused is how many graphs this call completed from the result index
	// (SubmitOptions.ReuseFrom) rather than enqueued.
	Reused int `json:"reused,omitempty"`
	// Status is the run's status when it was submitted before (running,
	// done or failed); a failed run is only tuned again with Force.
	Status string `json:"status,omitempty"`
	// Restored is set when Redis had lost the run and this call rebuilt
	// its record from the store before enqueuing what was pending.
	Restored bool `json:"restored,omitempty"`
	// Held are the tasks of the graphs left to tune, with Hold.
	Held []HeldTask `json:"-"`
}

// HeldTask is a tune:graph task built by Submit with Hold, not enqueued.
type HeldTask struct {
	Run, Graph, Target string
	task               *asynq.Task
	opts               []asynq.Option
}

// EnqueueHeld enqueues a held task; a task whose ID exists already (a
// replica enqueued it) is left alone and reported as not enqueued.
func (c *Client) EnqueueHeld(ctx context.Context, h HeldTask) (bool, error) {
	_, err := c.q.EnqueueContext(ctx, h.task, h.opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue graph %s of run %s: %w", h.Graph, h.Run, err)
	}
	return true, nil
}

// Validate checks options before anything is uploaded.
func (o SubmitOptions) Validate() error {
	if err := CheckTarget(o.Target); err != nil {
		return err
	}
	opts := tuner.Options{Backends: o.Backends, Strategy: o.Strategy, Candidates: o.Candidates, Baseline: o.Baseline}
	return opts.Validate()
}

// Submit uploads the bundle's files as blobs, writes run.json, records the
// run and enqueues one tune:graph task per graph. Submitting the same run
// again enqueues nothing. Incremental reuse happens in the worker, which
// alone knows the platform a result must match (a target class may be
// served by machines of several platforms).
func (c *Client) Submit(ctx context.Context, b *bundle.Bundle, o SubmitOptions) (Submission, error) {
	p, err := Prepare(b, o)
	if err != nil {
		return Submission{}, err
	}
	return c.SubmitPrepared(ctx, p)
}

// SubmitPrepared submits what Prepare made ready, as Submit does.
func (c *Client) SubmitPrepared(ctx context.Context, p *Prepared) (Submission, error) {
	sb := p.sb
	run := sb.run
	sub := Submission{Run: run, Model: sb.manifest.Model, Graphs: len(sb.manifest.Graphs), BundleDigest: sb.digest}
	existing, err := c.runs.Get(ctx, run)
	if errors.Is(err, runstate.ErrNoRun) {
		// Submitted before, and Redis lost it (run.json is in the store):
		// rebuild its record rather than start it again from attempt 1,
		// which would overwrite the stored attempts' results.
		restored, rerr := Restore(ctx, c.runs, c.store, run)
		switch {
		case rerr == nil && restored:
			existing, err = c.runs.Get(ctx, run)
			sub.Restored = true
		case rerr != nil && !errors.Is(rerr, runstate.ErrNoRun):
			return Submission{}, rerr
		}
	}
	switch {
	case err == nil:
		return c.resume(ctx, sb, existing, sub)
	case !errors.Is(err, runstate.ErrNoRun):
		return Submission{}, err
	}
	return c.create(ctx, sb, sub)
}

// resume handles a run submitted before: it enqueues only what is still
// pending and has no task (a submission that died half-way is completed;
// anything else is a no-op thanks to the task IDs).
func (c *Client) resume(ctx context.Context, sb *submission, existing runstate.RunStatus, sub Submission) (Submission, error) {
	run, o := sb.run, sb.o
	sub.Status = existing.Status
	graphs := existing.GraphNames()
	var err error
	if len(o.ReuseFrom) > 0 && !existing.Final() {
		// A submission that died before completing its reused graphs
		// (or a replica racing this one): complete them, count-once.
		if graphs, sub.Reused, err = c.reuseIndexed(ctx, run, nil, o.ReuseFrom, graphs, nil); err != nil {
			return sub, err
		}
		// The first submission may have skipped the upload, every graph
		// being indexed then; one left to a worker needs the bundle.
		if left, err := c.runs.PendingCount(ctx, run); err != nil {
			return sub, err
		} else if left > 0 {
			if err := artifacts.PutFiles(ctx, c.store, fileBlobs(sb.b, sb.files), artifacts.DefaultPutConcurrency); err != nil {
				return sub, fmt.Errorf("upload bundle files: %w", err)
			}
		}
	}
	if o.Hold {
		sub.Held, err = c.pendingTasks(ctx, run, nil, graphs)
	} else {
		sub.Enqueued, err = c.enqueuePending(ctx, run, nil, graphs)
	}
	if err == nil && !existing.Final() && existing.Done+existing.Failed+existing.Cancelled == existing.Total {
		// Every graph finished but finalize never ran (its enqueue
		// was lost): submitting again repairs the run. Skipping before
		// enqueue, a replica may be finalizing it inline right now:
		// finalize here too (a repeated finalize is a no-op) rather
		// than queue a task for a run that needs none.
		if len(o.ReuseFrom) > 0 {
			err = c.finalizeInline(ctx, run, existing.Target, nil)
		} else {
			err = enqueueFinalize(ctx, c.runs, c.q, run, existing.Target)
		}
	}
	return sub, err
}

// ErrRunNotInStore is wrapped by Submit's error when Redis records the run
// being submitted again but the store has no run.json for it: the store
// was emptied, or is not the one the run was submitted to. Submitting
// again cannot repair that (its graphs' results went with the store);
// the user picks the store or a new run (--force).
var ErrRunNotInStore = errors.New("run recorded in Redis but missing from the store")

// readSubmitted reads the run.json of a run submitted before.
func (c *Client) readSubmitted(ctx context.Context, run string, spec *RunSpec) error {
	err := artifacts.GetJSON(ctx, c.store, artifacts.RunKey(run), spec)
	if errors.Is(err, artifacts.ErrNotExist) {
		return fmt.Errorf("run %s: %w: %s has no %s (was the store emptied, or is this not the store it was submitted to? "+
			"use that store, or --force for a new run): %w", run, ErrRunNotInStore, c.store, artifacts.RunKey(run), err)
	}
	if err != nil {
		return fmt.Errorf("read run.json of %s: %w", run, err)
	}
	return nil
}

// create submits a new run: run.json, the bundle's blobs unless every
// graph is indexed (skipping before enqueue), the run's record, and the
// tasks of the graphs not completed from the index.
func (c *Client) create(ctx context.Context, sb *submission, sub Submission) (Submission, error) {
	run, o := sb.run, sb.o
	spec, graphs := sb.spec()
	// Skipping before enqueue, the index is read before the upload: when
	// every graph's result is known no worker will read the bundle, and
	// the upload (which re-hashes every blob the store has) is skipped.
	indexed, err := lookupIndexed(ctx, c.store, spec, o.ReuseFrom, graphs, nil)
	if err != nil {
		return Submission{}, err
	}
	if len(o.ReuseFrom) == 0 || slices.Contains(indexed, nil) {
		if err := artifacts.PutFiles(ctx, c.store, fileBlobs(sb.b, sb.files), artifacts.DefaultPutConcurrency); err != nil {
			return Submission{}, fmt.Errorf("upload bundle files: %w", err)
		}
	}
	if err := artifacts.PutJSON(ctx, c.store, artifacts.RunKey(run), spec); err != nil {
		return Submission{}, fmt.Errorf("write run.json: %w", err)
	}
	created, err := c.runs.Create(ctx, run, sb.manifest.Model, o.Target, graphs)
	if err != nil {
		return Submission{}, err
	}
	sub.Created = created
	if created && o.Nightly != "" {
		if err := c.runs.SetNightly(ctx, run, o.Nightly); err != nil {
			return Submission{}, err
		}
	}
	if !created { // a concurrent submit of the same run won the race
		if len(o.ReuseFrom) > 0 {
			// Help it complete the reused graphs (count-once), so that
			// when this call returns they are complete whoever did it.
			_, sub.Reused, err = c.reuseIndexed(ctx, run, spec, o.ReuseFrom, graphs, nil)
		}
		return sub, err
	}
	if graphs, sub.Reused, err = c.reuseIndexed(ctx, run, spec, o.ReuseFrom, graphs, indexed); err != nil {
		return sub, err
	}
	if o.Hold {
		sub.Held, err = c.pendingTasks(ctx, run, spec, graphs)
		return sub, err
	}
	sub.Enqueued, err = c.enqueuePending(ctx, run, spec, graphs)
	return sub, err
}

// spec is the run.json of a new run, and its graphs in manifest order.
func (sb *submission) spec() (*RunSpec, []string) {
	m, o := sb.manifest, sb.o
	spec := &RunSpec{
		Format: RunFormat, Run: sb.run, Model: m.Model, Target: o.Target, BundleDigest: sb.digest, Manifest: m,
		Files: map[string]artifacts.Ref{}, Strategy: o.Strategy.Name(), LatencyBudgetMs: o.Strategy.LatencyBudgetMs(), Baseline: o.Baseline,
		Candidates: sb.cands, BenchTime: o.BenchTime, Warmup: o.Warmup, CandidateTime: o.CandidateTimeout, WorkKeys: map[string]string{},
		SubmittedAt: time.Now().UTC(), SubmittedBy: hostname(), Command: o.Command, Tunefleet: version.String(),
		RetryFailed:  o.RetryFailed,
		Nightly:      o.Nightly,
		FindMaxBatch: o.FindMaxBatch,
		Remeasure:    o.Remeasure,
		Work:         sb.work,
	}
	byPath := map[string]bundle.FileDigest{}
	for _, f := range sb.files {
		byPath[f.Path] = f
		spec.Files[f.Path] = artifacts.Ref{SHA256: f.SHA256, Size: f.Size}
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
		work := bundle.DigestOf(gf) + "\x00" + decl + "\x00" + dyn
		if o.FindMaxBatch {
			// Another range, other engines: not the work of the recorded
			// range (whose keys stay what they were).
			work += "\x00find-max-batch"
		}
		spec.WorkKeys[g.Name] = WorkKey(work, o.Target, spec.Strategy, spec.LatencyBudgetMs, sb.cands, tuner.ResultFormat)
		graphs = append(graphs, g.Name)
	}
	return spec, graphs
}

// enqueuePending enqueues the tasks of the run's graphs that are still
// pending; a task whose ID exists already is left alone.
func (c *Client) enqueuePending(ctx context.Context, run string, spec *RunSpec, graphs []string) (int, error) {
	tasks, err := c.pendingTasks(ctx, run, spec, graphs)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range tasks {
		ok, err := c.EnqueueHeld(ctx, h)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// pendingTasks builds the tasks of the run's graphs that are still
// pending, in the order of graphs.
func (c *Client) pendingTasks(ctx context.Context, run string, spec *RunSpec, graphs []string) ([]HeldTask, error) {
	if spec == nil { // a run submitted before: its run.json says how
		spec = &RunSpec{}
		if err := c.readSubmitted(ctx, run, spec); err != nil {
			return nil, err
		}
	}
	// One read of the pending set, not a round trip per graph.
	pending, err := c.runs.Pending(ctx, run)
	if err != nil {
		return nil, err
	}
	isPending := make(map[string]bool, len(pending))
	for _, g := range pending {
		isPending[g] = true
	}
	var out []HeldTask
	for _, g := range graphs {
		if !isPending[g] {
			continue
		}
		task, opts, err := newGraphTask(GraphPayload{V: PayloadVersion, Run: run, Graph: g, WorkKey: spec.WorkKeys[g]},
			spec.Target, spec.CandidateTime, len(spec.Candidates))
		if err != nil {
			return nil, err
		}
		out = append(out, HeldTask{Run: run, Graph: g, Target: spec.Target, task: task, opts: opts})
	}
	return out, nil
}

// fileBlobs are the bundle's files as the blobs to upload. They go up
// several at once (PutFiles): most are small, so a sequential loop spends
// its time in round trips. The first failure stops the rest.
func fileBlobs(b *bundle.Bundle, files []bundle.FileDigest) []artifacts.FileBlob {
	blobs := make([]artifacts.FileBlob, 0, len(files))
	for _, f := range files {
		ref := artifacts.Ref{SHA256: f.SHA256, Size: f.Size}
		blobs = append(blobs, artifacts.FileBlob{Path: filepath.Join(b.Dir, filepath.FromSlash(f.Path)), Ref: ref})
	}
	return blobs
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
