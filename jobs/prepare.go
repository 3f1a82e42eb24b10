package jobs

// Preparing a submission: its options checked, the bundle's files hashed
// once, the tolerances applied, and the run id and work id derived, before
// anything is written (Client.SubmitPrepared writes it). A nightly prepares
// an entry to learn its work id, or derives it from a digest alone
// (WorkID), and submits only what it cannot carry forward.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/tuner"
)

// Prepared is a bundle made ready to submit (Prepare): its options
// checked, its files hashed and its run and work ids derived. The nightly
// prepares an entry first to learn its work id, and submits it only when
// no earlier run of the same work can be carried forward.
type Prepared struct{ sb *submission }

// Prepare checks the options and hashes the bundle's files once: what
// SubmitPrepared submits, with nothing written yet.
func Prepare(b *bundle.Bundle, o SubmitOptions) (*Prepared, error) {
	sb, err := prepareSubmission(b, o)
	if err != nil {
		return nil, err
	}
	return &Prepared{sb}, nil
}

// Run is the id of the run Submit would create or find.
func (p *Prepared) Run() string { return p.sb.run }

// Work is the submission's work id: its run id computed without the
// nightly's part of the salt (everything else, tolerances, bench time,
// warm-up, baseline, find-max-batch, retry-failed, stays) and with the
// result format (tuner.ResultFormat). Every night that submits the same
// bundle with the same settings has the same work id.
func (p *Prepared) Work() string { return p.sb.work }

// BundleDigest is the digest of the bundle's files.
func (p *Prepared) BundleDigest() string { return p.sb.digest }

// Graphs is how many graphs the run has.
func (p *Prepared) Graphs() int { return len(p.sb.manifest.Graphs) }

// submission is a bundle made ready to submit: options checked, every file
// hashed once (the digest, the uploads and the work keys all come from
// this list), tolerances applied and the run id derived.
type submission struct {
	b        *bundle.Bundle
	o        SubmitOptions
	files    []bundle.FileDigest
	digest   string
	cands    []string
	manifest bundle.Manifest
	run      string
	work     string // Prepared.Work
}

func prepareSubmission(b *bundle.Bundle, o SubmitOptions) (*submission, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, err := aitune.ParseBlock(b.Manifest.AITune, b.Manifest); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Dir, err)
	}
	if o.BenchTime == 0 {
		o.BenchTime = backend.DefaultStopRule().MaxTime
	}
	if o.CandidateTimeout == 0 {
		o.CandidateTimeout = 30 * time.Minute
	}
	files, err := b.Files()
	if err != nil {
		return nil, err
	}
	sb := &submission{b: b, o: o, files: files, digest: bundle.DigestOf(files), cands: make([]string, len(o.Candidates))}
	for i, cand := range o.Candidates {
		sb.cands[i] = cand.String()
	}
	if sb.manifest, err = withTolerances(b.Manifest, o.Tolerances); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Dir, err)
	}
	sb.run = RunID(sb.manifest.Model, sb.digest, o.Target, o.Strategy.Name(), o.Strategy.LatencyBudgetMs(), sb.cands, runSalt(o))
	sb.work = workID(sb.manifest.Model, sb.digest, o, sb.cands)
	return sb, nil
}

// workID is the work id (Prepared.Work): the run id without the night,
// and with the result format its work keys hold (a tunefleet whose results
// read otherwise does not carry a run of the old format forward; the index
// would not reuse its results either).
func workID(model, digest string, o SubmitOptions, cands []string) string {
	o.Nightly = ""
	return RunID(model, digest, o.Target, o.Strategy.Name(), o.Strategy.LatencyBudgetMs(), cands, runSalt(o)+"\x00result-format:"+tuner.ResultFormat)
}

// WorkID is the work id Prepare would give the bundle of model whose
// files have the digest bundleDigest (bundle.DigestOf), submitted with o,
// without the bundle at hand: a nightly whose bundle is in the store
// learns it from the stored bundle's index, and fetches the bundle only
// when the work is not done already. What only the bundle can check (its
// validity, an aitune block, tolerances naming its outputs) was checked
// when the run of that work id was submitted: the same digest is the
// same files.
func WorkID(model, bundleDigest string, o SubmitOptions) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	cands := make([]string, len(o.Candidates))
	for i, cand := range o.Candidates {
		cands[i] = cand.String()
	}
	return workID(model, bundleDigest, o, cands), nil
}

// runSalt is what makes a run another than the same bundle, target,
// strategy and candidates submitted without these options.
func runSalt(o SubmitOptions) string {
	salt := ""
	if o.Force || o.Remeasure {
		salt = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if o.Remeasure {
		salt += "\x00remeasure"
	}
	for _, t := range o.Tolerances {
		salt += "\x00" + t.String()
	}
	if o.RetryFailed {
		salt += "\x00retry-failed"
	}
	if o.Nightly != "" {
		salt += "\x00nightly:" + o.Nightly
	}
	if o.Baseline != "" {
		salt += "\x00baseline:" + o.Baseline
	}
	// Another measurement time measures anew: a run with --bench-time 2s
	// is not the one with 200ms ("already submitted" would hand back the
	// shorter one's figures). The default adds nothing, so the IDs of runs
	// submitted without it stay what they were.
	if o.BenchTime != 0 && o.BenchTime != backend.DefaultStopRule().MaxTime {
		salt += "\x00bench-time:" + o.BenchTime.String()
	}
	// So does another warm-up bound (the default, zero, adds nothing).
	if o.Warmup != 0 {
		salt += "\x00warmup:" + o.Warmup.String()
	}
	if o.FindMaxBatch {
		salt += "\x00find-max-batch"
	}
	return salt
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
