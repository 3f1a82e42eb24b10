// Package storegc removes what a store no longer needs: old runs and the
// blobs nothing kept references. It is a mark and sweep.
//
// Runs. A run (runs/<run>/…) is removed only when it is final — Redis says
// so (when a [FinalFunc] is given and Redis still knows the run), or,
// without Redis or once Redis has forgotten it, the run has a state.json
// (finalize writes it before it marks the run finished) — and it is not one
// of the newest KeepRuns runs of its model and target, it finished longer
// than OlderThan ago, and no latest.json names it. A run that is not final
// is never touched. A run directory with neither run.json nor state.json
// (a late duplicate attempt writing into a run already removed) goes once
// all of it is older than the grace period.
//
// Blobs. Every object outside blobs/ that is not part of a removed run is a
// root: the kept runs (run.json, results, attempts, state.json), every
// latest.json, history entry, the result index and negative cache, nightly
// plans and summaries, and whatever layout comes next. Every sha256 any
// root JSON document mentions, however it spells it ("sha256:<hex>", a bare
// hex field, a blob key), marks that blob: robust to layout changes, as
// internal/testkit/stack's orphan check is. An unmarked blob is swept only when it
// is older than the grace period: a run in flight uploads its blobs before
// the manifests that name them, so a young blob may be one a manifest will
// name in a moment. Roots written while the collection ran (new keys, and
// every latest.json again) are read a second time just before the sweep,
// so a manifest finalized meanwhile keeps what it names.
//
// [Collect] only looks; [Plan.Sweep] deletes. The CLI is `producer gc`
// (internal/cli), a dry run unless --dry-run=false.
package storegc
