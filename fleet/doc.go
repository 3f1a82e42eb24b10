// Package fleet is nightly fleet tuning: the fleet file (fleet.yaml: which
// models are tuned on which target classes, and how), the nightly plan
// (nightly/<nightly-id>/plan.json, what one night submitted) and the
// planning that makes an unchanged fleet almost free.
//
// A nightly is identified by its date and the fleet file's digest, so the
// same night submitted twice, or by two replicas at once, is the same set
// of runs (their ids are derived from it) and enqueues nothing new.
//
// Skip before enqueue: workers register the platforms they serve for each
// class, with a heartbeat (runstate.RegisterPlatforms). For every model x
// target the planner computes the graphs' work keys and looks each up in
// the result index of every platform that served the class recently; a
// graph indexed on all of them is completed by the producer from the
// index (jobs.SubmitOptions.ReuseFrom) instead of being enqueued. A model
// whose every graph is unchanged is thus finalized by the producer itself:
// its run gets a state.json and moves latest.json like any run, with no
// task at all.
//
// Carry: before any of that, an entry whose work id (jobs.Prepared.Work:
// its run id without the night) is the one latest.json names under its
// class, on the class's only platform, names that earlier run in the plan
// (carried) and writes nothing, unless the nightly signs or retries what
// failed. An unchanged night thus costs a read of latest.json a model, not
// a run a model. The work id comes from the bundle's identity before the
// bundle is opened (jobs.WorkID): a stored bundle's index, a directory's
// files hashed (bundle.Identify); only bundles with work are fetched and
// validated. A scheduled producer opens bundle directories through a
// bundle.Memo, which does not read a bundle validated on an earlier night
// again while its files are unchanged.
//
// Scheduling (--schedule) wraps the same submission in a cron loop; the
// deterministic ids make a second replica's submission a no-op.
package fleet
