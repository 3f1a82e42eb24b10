// Package history is the append-only record of every finalized module
// state of a model on a platform, and the comparison of an entry with the
// one before it (what moved: winners, timings beyond measurement noise,
// graphs newly failing or recovered).
//
// An entry lives at
//
//	models/<model>/<platform>/history/<created>-<run>.json
//
// where created is the run's submission time (20060102T150405.000000000Z,
// so that keys sort in time order) and run its id: a run has exactly one
// key, so a repeated finalize finds its entry and writes nothing (Append
// is write-once). An entry is self-contained: it copies the figures it
// compares rather than pointing at result.json files that store GC may
// remove with their run.
//
// Beside the entries, models/<model>/<platform>/history-head.json (Head)
// names the newest HeadDepth of them, kept by finalize (AddToHead), so
// that what reads the newest entries (FindRecent, Recent) costs the same
// whatever the length of the history.
//
// The package reads and writes a store; it knows nothing about queues.
package history
