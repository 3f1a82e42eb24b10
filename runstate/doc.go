// Package runstate is the run bookkeeping in Redis: every Redis operation
// tunefleet makes on runs, as asynq's internal/rdb is every one asynq
// makes on tasks. It owns a run's record (status, counters, each graph's
// status), the attempts at a graph (numbering, the tuning mark that finds
// attempts dead with their worker, the newest failure, the time-budgeted
// retries), the platform a run is bound to and its hand-backs, the
// locks (Locked: latest.json's read-compare-write), cancel, the record
// rebuilt from the store (Restore), the reconciler's marks, the finalize
// generation, the listing and retention of runs, the registry of the
// platforms serving each target class, and the Lua scripts that make the
// steps that count once atomic; and the Redis URL (ConnectRedis).
//
// What lives in Redis, and for how long:
//
//	tunefleet:run:{RUN}[:pending|:graphs|:attempts|:handbacks|:tuning|:deaths|:failing|:progress]
//	    a run's bookkeeping: while it runs, then Retention after it ends;
//	    :progress holds each tuned graph's Progress (its worker's phase,
//	    candidate and since when), dropped when the attempt ends or the
//	    graph completes
//	    (a final run's hash also holds its summary, SetSummary, which a
//	    listing reads instead of the graphs: ListOptions.Graphs)
//	tunefleet:runs, tunefleet:runs:model:MODEL, tunefleet:runs:status:STATUS
//	    sorted by creation time, for `producer runs`; entries older than
//	    Retention are trimmed whenever a run ends
//	tunefleet:running    the runs not yet final, for the reconciler
//	tunefleet:lock:*, tunefleet:reconciler, tunefleet:epoch   locks and the reconciler's marks
//	tunefleet:classes, tunefleet:platforms:CLASS   the worker registry
//	asynq:*              asynq's queues (jobs'): a task is deleted when it
//	    succeeds, archived ones are kept by asynq (at most 10,000 per
//	    queue, 90 days)
//
// Everything a run produced is in the store, which is the record of truth;
// Redis keeps the moving parts. Every key of a run carries the run id as a
// hash tag, so one run's keys live on one Cluster node and one script may
// touch them together. Finalize once: the graph that completes counts once
// (CompleteGraph is an SREM in a script), and a run moves to its final
// status once (Finish), which the run's finalizations counter records.
//
// It must not import jobs (the queue: task types, handlers, submit,
// finalize, the reconciler's repairs; jobs builds on this package, never
// the other way), asynq (jobs' queue client and inspector use the same
// Redis through Runs.Client), nor directly the store (artifacts: jobs
// reads the store and hands Restore what it found), tuner or backends
// (backend, trt, ort) — history, imported for the bench summary a graph's
// status carries, links them — nor metrics, web or anything under
// internal/testkit. An import-graph test (internal/testkit/importgraph)
// keeps it so.
package runstate
