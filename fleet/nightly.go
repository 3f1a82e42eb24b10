package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/targetclass"
)

// DefaultWindow is how recent a worker's heartbeat must be for its
// platform to count as serving a class: a graph is skipped before enqueue
// only if its result is indexed for every platform seen in the window.
const DefaultWindow = 24 * time.Hour

// Submitter submits nightlies.
type Submitter struct {
	Redis    redis.UniversalClient
	Store    artifacts.Store
	Client   *jobs.Client
	Backends backend.Registry // to validate candidates
	// Window: see DefaultWindow (0: DefaultWindow).
	Window  time.Duration
	Command []string  // recorded in each run.json
	Log     io.Writer // one line per entry; nil discards
	Now     func() time.Time
	// Parallel is how many entries are submitted at once (0: DefaultParallel).
	Parallel int
	// StoreURL is Store's URL, to resolve a bundle named s3://… (bundlestore).
	StoreURL string
	// Declared are the target classes declared outside the fleet file
	// (TUNEFLEET_CLASSES): accepted with no worker ever seen.
	Declared []string
	// Workers counts the live workers of each class for the night's
	// expected finish (RegisteredWorkers; nil: none counted, only
	// Options.Workers).
	Workers func(ctx context.Context, classes []string) (map[string]int, error)
	// Bundles opens the entries' bundle directories, remembering them
	// across the nights of a scheduled producer (bundle.Memo); nil: each
	// is read and validated every night.
	Bundles *bundle.Memo
}

// StoredBundles is where entries whose bundle: names a stored bundle
// (bundlestore.IsRef) are fetched from: the store and its URL; and Memo,
// through which bundle directories are opened (nil: each read anew).
type StoredBundles struct {
	Store artifacts.Store
	URL   string
	Memo  *bundle.Memo
}

// DefaultParallel is how many entries a nightly submits at once.
const DefaultParallel = 16

// Options of one nightly.
type Options struct {
	Date   time.Time // the night (UTC date); zero: today
	Notify string    // the webhook of the morning report, recorded in the plan
	// RetryFailed builds the candidates the negative cache would skip
	// (jobs.SubmitOptions.RetryFailed), for every entry of the night.
	RetryFailed bool
	// Workers are assumed worker counts by class (--workers CLASS=N), in
	// place of the registered ones: a class that scales from zero has none
	// registered when the night is planned.
	Workers map[string]int
	// Deadline: when set, the estimate names the classes whose work will
	// not fit before it (state.PlanEstimate.Short; DeadlineWarning).
	Deadline time.Time
	// DefaultSeconds is a graph's estimate when its class has no graph
	// with a history tonight (0: a guess from its bundle, nightplan.Guess).
	// Either way such a night's finish is marked a guess.
	DefaultSeconds float64
	// SubmissionOrder enqueues in the fleet file's order instead of
	// longest expected first (to measure what planning gains).
	SubmissionOrder bool
	// NoCarry makes a run for every entry, as nightlies did before an
	// unchanged entry carried its earlier run forward (to measure what
	// carrying saves).
	NoCarry bool
	// OpenCarried opens (fetches and validates) the bundle of every entry
	// before deciding whether it carries its run forward, as nightlies did
	// before the decision was made from the bundle's identity (to measure
	// what that saves).
	OpenCarried bool
}

// Submit submits every enabled model x target of the fleet once for the
// night, and writes the plan. When the night's plan exists already (the
// same fleet file submitted again that night, or by another replica that
// finished first) it is returned as it is and nothing is submitted:
// existed is true. Bad input (the fleet file, a bundle, a class no worker
// serves) is an *Error, found before anything is submitted; a bundle
// whose work is done is carried from its identity, not opened
// (carryUnopened). A model whose
// submission fails is recorded as failed in the plan, and the others go on.
func (s *Submitter) Submit(ctx context.Context, f *File, o Options) (plan *state.Plan, existed bool, err error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	window := s.Window
	if window <= 0 {
		window = DefaultWindow
	}
	if o.Date.IsZero() {
		o.Date = now()
	}
	id := NightlyID(o.Date, f.Digest)
	var prev state.Plan
	switch err := artifacts.GetJSON(ctx, s.Store, state.PlanKey(id), &prev); {
	case err == nil:
		return &prev, true, nil
	case !errors.Is(err, artifacts.ErrNotExist):
		return nil, false, fmt.Errorf("read the plan of nightly %s: %w", id, err)
	}
	entries, err := f.Entries()
	if err != nil {
		return nil, false, err
	}
	if err := f.CheckBackends(entries, s.Backends); err != nil {
		return nil, false, err
	}
	if err := s.checkClasses(ctx, f, entries, log); err != nil {
		return nil, false, err
	}
	since := now().Add(-window)
	// The platforms serving each class are read once for the night, not
	// once an entry: a fleet of 10,000 models on one class made it 10,000
	// round trips for the same answer.
	platforms := map[string]recent{}
	for _, e := range entries {
		if _, ok := platforms[e.Target]; !ok {
			ps, err := runstate.RecentPlatforms(ctx, s.Redis, e.Target, since)
			platforms[e.Target] = recent{ps, err}
		}
	}
	// Entries whose bundle's work is done are decided from its identity,
	// before any bundle is fetched or opened; the rest are opened (every
	// problem found before anything is submitted).
	decided := s.carryUnopened(ctx, entries, id, platforms, o)
	var rest []Entry
	for i, e := range entries {
		if decided[i] == nil {
			rest = append(rest, e)
		}
	}
	if slices.ContainsFunc(rest, func(e Entry) bool { return bundlestore.IsRef(e.Bundle) }) {
		// Fetched bundles are removed at the night's end; a nightly killed
		// before it left them, weights and all, in the temporary directory.
		if n, err := bundlestore.RemoveOrphans(); err != nil {
			fmt.Fprintf(log, "removing bundles fetched by nightlies that are gone: %v\n", err)
		} else if n > 0 {
			fmt.Fprintf(log, "removed %d bundle(s) fetched into %s by nightlies that are gone\n", n, os.TempDir())
		}
	}
	bundles, closeAll, err := openBundles(ctx, &StoredBundles{s.Store, s.StoreURL, s.Bundles}, f, rest)
	defer closeAll()
	if err != nil {
		return nil, false, err
	}

	plan = &state.Plan{Format: state.PlanFormat, Nightly: id, FleetDigest: f.Digest, CreatedAt: now().UTC(), Notify: o.Notify}
	// Entries are submitted several at once: an unchanged one is a few
	// dozen store and Redis round trips, which a fleet of hundreds would
	// otherwise wait for one after the other. They start in priority order.
	// Their tasks are held, not enqueued, until every entry is submitted:
	// then a class's graphs go to its queue longest expected first across
	// every model (the queue is FIFO), so that no long graph starts last.
	plan.Entries = make([]state.PlanEntry, len(entries))
	heldBy := make([][]jobs.HeldTask, len(entries))
	known := make([]map[string]float64, len(entries))
	guessed := make([]map[string]float64, len(entries))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(s.Parallel, DefaultParallel))
	for i, e := range entries {
		g.Go(func() error {
			var pe state.PlanEntry
			var hs []jobs.HeldTask
			if decided[i] != nil {
				pe = *decided[i]
			} else {
				pe, hs = s.submitOne(gctx, e, bundles[e.Model], id, platforms[e.Target], o)
			}
			if len(hs) > 0 {
				ps, err := pasts(gctx, s.Store, e.Model, e.Target)
				if err != nil { // an estimate is not worth the night: a default one
					fmt.Fprintf(log, "%s on %s: no estimate from history: %v\n", e.Model, e.Target, err)
				}
				known[i] = nightplan.Pick(ps, candidateStrings(e))
				guessed[i] = guesses(e, bundles[e.Model], hs)
			}
			plan.Entries[i], heldBy[i] = pe, hs
			mu.Lock()
			fmt.Fprintf(log, "%-24s %-10s %-9s %s (%d graphs: %d enqueued, %d reused)%s\n", e.Model, e.Target, pe.Outcome, orDash(pe.Run), pe.Graphs, pe.Enqueued, pe.Reused, errSuffix(pe.Error))
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	if ctx.Err() != nil {
		return nil, false, ctx.Err() // no plan: a rerun completes the night
	}
	var tasks []held
	for i, hs := range heldBy {
		for _, h := range hs {
			tasks = append(tasks, held{entry: i, task: h})
		}
	}
	if plan.Estimate, err = s.enqueuePlanned(ctx, plan, entries, tasks, known, guessed, o); err != nil {
		// No plan: a rerun finds the runs pending and enqueues them.
		return nil, false, fmt.Errorf("nightly %s: %w", id, err)
	}
	if err := artifacts.PutJSON(ctx, s.Store, state.PlanKey(id), plan); err != nil {
		return nil, false, fmt.Errorf("write the plan of nightly %s: %w", id, err)
	}
	return plan, false, nil
}

// submitOne submits one model x target and describes it for the plan.
// Its figures come from the run's record, not from this call, so that a
// replica that finds the run submitted by another writes the same entry.
// Its tasks are returned held (jobs.SubmitOptions.Hold), to be enqueued
// in the night's order.
func (s *Submitter) submitOne(ctx context.Context, e Entry, b *bundle.Bundle, nightly string, platforms recent, o Options) (state.PlanEntry, []jobs.HeldTask) {
	pe := state.PlanEntry{Model: e.Model, Target: e.Target, Graphs: len(b.Manifest.Graphs)}
	fail := func(err error) (state.PlanEntry, []jobs.HeldTask) {
		pe.Outcome, pe.Error = state.OutcomeFailed, err.Error()
		return pe, nil
	}
	if platforms.err != nil {
		return fail(platforms.err)
	}
	opts := s.entryOptions(e, nightly, platforms, o)
	p, err := jobs.Prepare(b, opts)
	if err != nil {
		return fail(err)
	}
	pe.Run, pe.BundleDigest = p.Run(), p.BundleDigest()
	if run, ok := s.carried(ctx, e, p.Work(), platforms.ps, opts.RetryFailed || o.NoCarry); ok {
		return carriedEntry(e, run, p.BundleDigest(), p.Graphs()), nil
	}
	sub, err := s.Client.SubmitPrepared(ctx, p)
	pe.Run, pe.BundleDigest = sub.Run, sub.BundleDigest
	if err != nil {
		return fail(err)
	}
	if sub.Created && sub.Graphs > 0 && sub.Reused == sub.Graphs {
		// This call created the run and completed every graph from the
		// index itself (a graph completes once, so no one else did): the
		// record can only say that, and an unchanged night need not read
		// 10,000 of them back.
		pe.Graphs, pe.Reused, pe.Enqueued, pe.Outcome = sub.Graphs, sub.Reused, 0, state.OutcomeUnchanged
		return pe, nil
	}
	st, err := s.Client.Runs().Get(ctx, sub.Run)
	if err != nil {
		return fail(err)
	}
	for _, g := range st.Graphs {
		if jobs.ReusedBeforeEnqueue(g) {
			pe.Reused++
		}
	}
	pe.Graphs = st.Total
	pe.Enqueued = st.Total - pe.Reused
	pe.Outcome = state.OutcomeSubmitted
	if pe.Enqueued == 0 {
		pe.Outcome = state.OutcomeUnchanged
	}
	return pe, sub.Held
}

// carried is the run an entry carries forward, if it may: the run
// latest.json names under the entry's class did the entry's work (the same
// work id: the same bundle, target, strategy, candidates and settings,
// whatever night submitted it), ended done (latest.json names nothing
// else) and ran on the one platform that serves the class now. Then
// tonight has nothing to tune and nothing to say that the run's state,
// latest.json and history entry do not say already: the entry names the
// run instead of making one, which costs one read of latest.json instead
// of a run's nine durable objects and its Redis records.
//
// Everything else makes a run as ever: a class served by several
// platforms (a run is bound to one, and a second platform may lack the
// result), no latest.json or one written before work ids were recorded,
// other work, never (--retry-failed, which asks to build again what
// failed, or Options.NoCarry), and a signing client: a signed nightly
// re-publishes and signs every unchanged model, which keeps each signed
// pointer's age fresh for deploy tooling that checks it (fetch
// --verify-key --max-age). A latest.json that
// cannot be read is left to the submission, which reads the store too.
func (s *Submitter) carried(ctx context.Context, e Entry, work string, platforms []string, never bool) (string, bool) {
	l, ok := s.carriable(ctx, e, platforms, never)
	if !ok || l.Work != work {
		return "", false
	}
	return l.Run, true
}

// carriable is the latest.json under the entry's class when a run of some
// work could be carried forward from it (carried: the run's work id
// recorded, on the class's only platform, and the nightly may carry);
// false otherwise, when the entry's own work id need not be known.
func (s *Submitter) carriable(ctx context.Context, e Entry, platforms []string, never bool) (state.Latest, bool) {
	if never || s.Client.Signs() || len(platforms) != 1 {
		return state.Latest{}, false
	}
	var l state.Latest
	if err := artifacts.GetJSON(ctx, s.Store, artifacts.LatestKey(e.Model, e.Target), &l); err != nil {
		return state.Latest{}, false
	}
	if l.Work == "" || l.RanOn() != platforms[0] || l.Run == "" {
		return state.Latest{}, false
	}
	return l, true
}

// entryOptions are the submission options of an entry tonight.
func (s *Submitter) entryOptions(e Entry, nightly string, platforms recent, o Options) jobs.SubmitOptions {
	opts := e.Options
	opts.Backends, opts.Nightly, opts.ReuseFrom, opts.Command = s.Backends, nightly, platforms.ps, s.Command
	opts.RetryFailed = opts.RetryFailed || o.RetryFailed
	opts.Hold = true
	return opts
}

// carriedEntry is the plan entry of an entry that carries run forward:
// nothing is written for it tonight (no run, no state, no pointer moved,
// no history entry), and every graph of it counts as reused.
func carriedEntry(e Entry, run, digest string, graphs int) state.PlanEntry {
	return state.PlanEntry{Model: e.Model, Target: e.Target, Run: run, BundleDigest: digest, Carried: true,
		Graphs: graphs, Reused: graphs, Outcome: state.OutcomeUnchanged}
}

// carryUnopened decides, before any bundle is opened, the entries that
// carry a run forward (carried), from their bundle's identity alone: its
// model, digest (which with the entry's options is its work id,
// jobs.WorkID) and graph count. A bundle in the store (bundlestore.IsRef)
// is identified by its index (its graphs recorded there or, in an index
// pushed before they were, read from its stored bundle.json): two small
// reads where fetching it moved every file of it, weights included, and
// validated it. A bundle directory, when no Memo remembers bundles
// validated before (a one-shot producer), is identified by bundle.Identify:
// its files hashed and its ONNX files walked, without the validation
// (every sample decoded) that opening it costs. Either way the same work
// id is the same files, which were validated when that run was submitted.
// The result holds the plan entry of each entry so decided, by index,
// and nil for every other: anything unsure (a reference, index or file
// that does not read, another model, options that do not validate, a run
// that may not be carried, an archive) is left to the entry's opening and
// submission, which say what is wrong.
func (s *Submitter) carryUnopened(ctx context.Context, entries []Entry, nightly string, platforms map[string]recent, o Options) []*state.PlanEntry {
	out := make([]*state.PlanEntry, len(entries))
	if o.NoCarry || o.OpenCarried || s.Client.Signs() {
		return out
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(s.Parallel, DefaultParallel))
	for i, e := range entries {
		ps := platforms[e.Target]
		stored := bundlestore.IsRef(e.Bundle)
		dir := !stored && s.Bundles == nil && !bundle.IsArchive(e.Bundle)
		if (!stored && !dir) || ps.err != nil || len(ps.ps) != 1 {
			continue
		}
		g.Go(func() error {
			opts := s.entryOptions(e, nightly, ps, o)
			// latest.json first: a model with nothing to carry (a new
			// one, a first night) is not identified twice, here and when
			// it is opened.
			l, ok := s.carriable(gctx, e, ps.ps, opts.RetryFailed)
			if !ok {
				return nil
			}
			id, err := s.identify(gctx, e, stored)
			if err != nil || id.Model != e.Model {
				return nil
			}
			work, err := jobs.WorkID(e.Model, id.Digest, opts)
			if err != nil || work != l.Work {
				return nil
			}
			run := l.Run
			if id.Graphs == 0 && id.index != nil { // counted only when carried
				if id.Graphs, err = id.index.GraphCount(gctx, s.Store); err != nil {
					return nil
				}
			}
			pe := carriedEntry(e, run, id.Digest, id.Graphs)
			out[i] = &pe
			return nil
		})
	}
	g.Wait()
	return out
}

// identity is a bundle's (bundle.Identity), with the stored index it came
// from when the bundle is in the store.
type identity struct {
	bundle.Identity
	index *bundlestore.Index
}

// identify is the identity of an entry's bundle: from its stored index,
// or bundle.Identify of its directory.
func (s *Submitter) identify(ctx context.Context, e Entry, stored bool) (identity, error) {
	if !stored {
		id, err := bundle.Identify(e.Bundle)
		return identity{Identity: id}, err
	}
	key, err := bundlestore.Key(e.Bundle, s.StoreURL)
	if err != nil {
		return identity{}, err
	}
	idx, err := bundlestore.ReadIndex(ctx, s.Store, key)
	if err != nil {
		return identity{}, err
	}
	return identity{Identity: bundle.Identity{Model: idx.Model, Digest: idx.Digest, Graphs: idx.Graphs}, index: &idx}, nil
}

// recent are the platforms that served a class recently
// (runstate.RecentPlatforms), or why they could not be read.
type recent struct {
	ps  []string
	err error
}

// checkClasses applies the target class rule (package targetclass) to
// every entry: a class neither declared (the fleet file's classes:, the
// Submitter's Declared) nor ever served is refused, with the closest known
// class suggested; a declared class with no live worker is submitted, its
// tasks waiting for the first worker (scale-from-zero), and said in the
// log.
func (s *Submitter) checkClasses(ctx context.Context, f *File, entries []Entry, log io.Writer) error {
	reg, err := targetclass.Load(ctx, s.Redis, append(slices.Clone(s.Declared), f.Classes...))
	if err != nil {
		return err
	}
	said := map[string]bool{}
	for _, e := range entries {
		v, err := reg.Judge(e.Target)
		if err != nil {
			return &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q: %v", e.Model, err)}
		}
		if w := v.Waiting(); w != "" && !said[e.Target] {
			said[e.Target] = true
			fmt.Fprintf(log, "%s: its tasks queue until one starts\n", w)
		}
	}
	return nil
}

// openBundles opens each model's bundle once (its targets share it) and
// checks that it is the model the fleet file says.
func openBundles(ctx context.Context, sb *StoredBundles, f *File, entries []Entry) (map[string]*bundle.Bundle, func(), error) {
	// One per model (a model with two targets has two entries), opened a
	// few at once: each is a manifest and its samples read and checked.
	var first []Entry
	seen := map[string]bool{}
	for _, e := range entries {
		if !seen[e.Model] {
			seen[e.Model] = true
			first = append(first, e)
		}
	}
	opened := make([]*bundle.Bundle, len(first))
	cleanups := make([]func(), len(first))
	errs := make([]error, len(first))
	var g errgroup.Group
	g.SetLimit(4)
	for i, e := range first {
		g.Go(func() error {
			opened[i], cleanups[i], errs[i] = openBundle(ctx, sb, f, e)
			return nil
		})
	}
	g.Wait()
	closeAll := func() {
		for _, c := range cleanups {
			if c != nil {
				c()
			}
		}
	}
	// Every bundle's problem at once (the file's order); a service's
	// trouble, which is not the file's to fix, comes first and alone.
	out := map[string]*bundle.Bundle{}
	var probs Problems
	for i, e := range first {
		var fe *Error
		switch {
		case errs[i] == nil:
			out[e.Model] = opened[i]
		case errors.As(errs[i], &fe):
			probs = append(probs, fe)
		default:
			return nil, closeAll, errs[i]
		}
	}
	if err := probs.orNil(); err != nil {
		return nil, closeAll, err
	}
	return out, closeAll, nil
}

// openBundle opens one entry's bundle (a directory, an archive unpacked
// until cleanup, or a stored bundle fetched until cleanup) and checks it
// is the entry's model.
func openBundle(ctx context.Context, sb *StoredBundles, f *File, e Entry) (*bundle.Bundle, func(), error) {
	var b *bundle.Bundle
	var cleanup func()
	var err error
	switch {
	case bundlestore.IsRef(e.Bundle):
		if sb == nil || sb.Store == nil {
			return nil, nil, &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q: bundle %s is in the store: give --store", e.Model, e.Bundle)}
		}
		var key string
		if key, err = bundlestore.Key(e.Bundle, sb.URL); err == nil {
			b, cleanup, err = bundlestore.FetchTemp(ctx, sb.Store, key)
		}
		if err != nil && !errors.Is(err, bundlestore.ErrBadRef) {
			return nil, cleanup, fmt.Errorf("model %q: fetch bundle %s: %w", e.Model, e.Bundle, err) // the store's trouble, not the file's
		}
	case bundle.IsArchive(e.Bundle):
		b, cleanup, err = bundle.OpenArchive(e.Bundle, "")
	default:
		var memo *bundle.Memo
		if sb != nil {
			memo = sb.Memo
		}
		b, err = memo.Open(e.Bundle)
	}
	if err != nil {
		return nil, cleanup, &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q: bundle: %v", e.Model, err)}
	}
	if b.Manifest.Model != e.Model {
		return nil, cleanup, &Error{Path: f.Path, Line: e.Line, Msg: fmt.Sprintf("model %q: bundle %s is model %q (model: must be bundle.json's model)", e.Model, e.Bundle, b.Manifest.Model)}
	}
	return b, cleanup, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// CheckBundles opens every entry's bundle and checks it is the model the
// fleet file says (producer fleet validate), leaving nothing behind. sb is
// where stored bundles are fetched from (nil: no store given).
func (f *File) CheckBundles(ctx context.Context, sb *StoredBundles, entries []Entry) error {
	_, closeAll, err := openBundles(ctx, sb, f, entries)
	closeAll()
	return err
}
