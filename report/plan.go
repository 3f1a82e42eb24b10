package report

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
)

// Keys of a nightly's documents (its plan's is state.PlanKey).
func SummaryKey(nightly string) string  { return "nightly/" + nightly + "/summary.json" }
func ReportKey(nightly string) string   { return "nightly/" + nightly + "/report.html" }
func NotifiedKey(nightly string) string { return "nightly/" + nightly + "/notified.json" }

// ErrBadNightly marks a nightly id that cannot name a folder, or names
// none with a plan: the user's to fix.
var ErrBadNightly = errors.New("bad nightly id")

var nightlyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckNightly rejects an id that could not be one folder of nightly/.
func CheckNightly(id string) error {
	if !nightlyID.MatchString(id) {
		return fmt.Errorf("%w %q: want letters, digits, '.', '_' or '-' (e.g. 2026-12-01-0123456789ab)", ErrBadNightly, id)
	}
	return nil
}

// ReadPlan reads a nightly's plan.json. A nightly without one gives an
// error wrapping ErrBadNightly and artifacts.ErrNotExist.
func ReadPlan(ctx context.Context, store artifacts.Store, nightly string) (*state.Plan, error) {
	if err := CheckNightly(nightly); err != nil {
		return nil, err
	}
	var p state.Plan
	err := artifacts.GetJSON(ctx, store, state.PlanKey(nightly), &p)
	if errors.Is(err, artifacts.ErrNotExist) {
		return nil, fmt.Errorf("%w: nightly %s has no %s in %s: %w", ErrBadNightly, nightly, state.PlanKey(nightly), store, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read the plan of nightly %s: %w", nightly, err)
	}
	if p.Format != state.PlanFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", state.PlanKey(nightly), p.Format, state.PlanFormat)
	}
	if p.Nightly != nightly {
		return nil, fmt.Errorf("%s names nightly %q", state.PlanKey(nightly), p.Nightly)
	}
	return &p, nil
}
