package fleet

import (
	"fmt"
	"github.com/tunefleet/tunefleet/state"
	"strings"
	"time"
)

// The plan document lives in package state, beside the other documents
// a run leaves; these names keep fleet's API.
const (
	PlanFormat       = state.PlanFormat
	OutcomeSubmitted = state.OutcomeSubmitted
	OutcomeUnchanged = state.OutcomeUnchanged
	OutcomeFailed    = state.OutcomeFailed
)

type (
	Plan      = state.Plan
	PlanEntry = state.PlanEntry
)

// PlanKey is where a nightly's plan is stored.
func PlanKey(nightly string) string { return state.PlanKey(nightly) }

// NightlyID names a nightly: its date (UTC) and the first 12 hex digits
// of the fleet file's digest, e.g. 2026-12-01-3f2a9c0d1e4b.
func NightlyID(date time.Time, fleetDigest string) string {
	hex := strings.TrimPrefix(fleetDigest, "sha256:")
	return date.UTC().Format(time.DateOnly) + "-" + hex[:min(12, len(hex))]
}

// ParseDate reads --date (YYYY-MM-DD, UTC).
func ParseDate(s string) (time.Time, error) {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--date %q: want YYYY-MM-DD", s)
	}
	return d, nil
}
