package state

import "time"

// PlanFormat is the version of plan.json.
const PlanFormat = "tunefleet.nightly/v1"

// Plan outcomes of an entry.
const (
	OutcomeSubmitted = "submitted" // some graph was enqueued for a worker
	OutcomeUnchanged = "unchanged" // every graph was reused before enqueue; the state was re-published
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
}

// PlanEntry is one model x target of a nightly.
type PlanEntry struct {
	Model  string `json:"model"`
	Target string `json:"target"`
	// Run is the run submitted (for an unchanged entry, the run that
	// re-published the state); empty when the submission failed before
	// it had one.
	Run          string `json:"run"`
	BundleDigest string `json:"bundle_digest"`
	Outcome      string `json:"outcome"`
	Error        string `json:"error"`
	Graphs       int    `json:"graphs"`
	Enqueued     int    `json:"enqueued"` // graphs sent to workers
	Reused       int    `json:"reused"`   // graphs completed from the result index before enqueue
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
