package state

import "time"

// PlanFormat is the version of plan.json.
const PlanFormat = "tunefleet.nightly/v1"

// Plan outcomes of an entry.
const (
	OutcomeSubmitted = "submitted" // some graph was enqueued for a worker
	OutcomeUnchanged = "unchanged" // every graph was reused before enqueue (re-published), or the entry carried an earlier run forward (Carried)
	OutcomeFailed    = "failed"    // the submission failed (Error says why)
)

// Plan is nightly/<nightly-id>/plan.json: what one nightly submitted, per
// model x target. Package fleet writes it; the morning report (package
// report) reads it, and each run's history entry, once every run is final.
type Plan struct {
	Format      string      `json:"format"`
	Nightly     string      `json:"nightly"`
	FleetDigest string      `json:"fleet_digest"`
	CreatedAt   time.Time   `json:"created_at"`
	Notify      string      `json:"notify"`
	Entries     []PlanEntry `json:"entries"`
	// Estimate is the night's expected device time per class and finish
	// (package nightplan); nil in plans written before it was.
	Estimate *PlanEstimate `json:"estimate"`
}

// Where a class's worker count in an estimate comes from.
const (
	WorkersRegistered = "registered" // live workers serving the class (asynq's server registry)
	WorkersAssumed    = "assumed"    // --workers CLASS=N (scale-from-zero)
	WorkersNone       = "none"       // neither: no finish time can be expected
)

// PlanEstimate is what the nightly expects of the night: the graphs it
// enqueued, longest expected first within a class and priority, taken by
// the class's workers in that order.
type PlanEstimate struct {
	// Order is how the graphs were enqueued: "planned" (priority, then
	// longest expected first) or "submission".
	Order string `json:"order"`
	// EnqueuedAt is when the last task was enqueued: the simulated night
	// starts there.
	EnqueuedAt time.Time       `json:"enqueued_at"`
	Classes    []ClassEstimate `json:"classes"`
	// ExpectedFinish is absent when a class with work has no worker
	// (registered or assumed).
	ExpectedFinish *time.Time `json:"expected_finish,omitempty"`
	// Guess says the expected finish is a guess: a class had no history
	// at all (a first night), so its graphs' estimates come from their
	// bundles (or --estimate-default), not from what they took before.
	Guess bool `json:"guess,omitempty"`
	// Deadline is --deadline's, if given; Short the classes that do not
	// fit before it.
	Deadline *time.Time   `json:"deadline,omitempty"`
	Short    []ShortClass `json:"short,omitempty"`
}

// ClassEstimate is one target class's share of the night.
type ClassEstimate struct {
	Class          string  `json:"class"`
	Graphs         int     `json:"graphs"`          // enqueued tonight
	DeviceSeconds  float64 `json:"device_seconds"`  // the sum of their estimates
	LongestSeconds float64 `json:"longest_seconds"` // the longest estimate
	// DefaultSeconds is the estimate of a graph with no history here: the
	// median of this class's graphs with one, else a constant.
	DefaultSeconds float64 `json:"default_seconds,omitempty"`
	// Guess says no graph of the class had a history: its estimates are
	// guesses (source "guess" or "default").
	Guess       bool   `json:"guess,omitempty"`
	Workers     int    `json:"workers"`
	WorkersFrom string `json:"workers_from"` // registered | assumed | none
	// MakespanSeconds is the simulated time from EnqueuedAt until the
	// class's last graph ends; 0 without a worker.
	MakespanSeconds float64 `json:"makespan_seconds"`
}

// ShortClass is a class whose work does not fit before the deadline.
type ShortClass struct {
	Class   string `json:"class"`
	Workers int    `json:"workers"`
	// Needed is the fewest workers that would fit; 0 when none would (a
	// graph alone is expected to take longer than the time left).
	Needed int `json:"needed"`
}

// Sources of a graph's estimate.
const (
	EstimateHistory = "history" // what it took the last time, with the same candidates on the class
	EstimateDefault = "default" // no history: the class's default
	EstimateGuess   = "guess"   // no history in the class at all: guessed from the bundle
)

// GraphEstimate is one enqueued graph's expected tuning time.
type GraphEstimate struct {
	Graph   string  `json:"graph"`
	Seconds float64 `json:"seconds"`
	Source  string  `json:"source"` // history | default | guess
}

// PlanEntry is one model x target of a nightly.
type PlanEntry struct {
	Model  string `json:"model"`
	Target string `json:"target"`
	// Run is the run submitted (for an unchanged entry, the run that
	// re-published the state, or the earlier run carried forward); empty
	// when the submission failed before it had one.
	Run string `json:"run"`
	// Carried says the entry's work (its work id: the same bundle and
	// settings) was done by Run, an earlier night's run that ended done on
	// the class's only platform: tonight made no run and wrote nothing for
	// it, and Run's state, latest.json and history stand.
	Carried      bool   `json:"carried"`
	BundleDigest string `json:"bundle_digest"`
	Outcome      string `json:"outcome"`
	Error        string `json:"error"`
	Graphs       int    `json:"graphs"`
	Enqueued     int    `json:"enqueued"` // graphs sent to workers
	Reused       int    `json:"reused"`   // graphs completed from the result index before enqueue
	// ExpectedSeconds is the sum of its enqueued graphs' estimates, one
	// each in Estimates.
	ExpectedSeconds float64         `json:"expected_seconds"`
	Estimates       []GraphEstimate `json:"estimates"`
}

// PlanKey is where a nightly's plan is stored.
func PlanKey(nightly string) string { return "nightly/" + nightly + "/plan.json" }

// Failed is how many entries failed to submit.
func (p *Plan) Failed() int {
	n := 0
	for _, e := range p.Entries {
		if e.Outcome == OutcomeFailed {
			n++
		}
	}
	return n
}
