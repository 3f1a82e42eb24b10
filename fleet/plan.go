package fleet

import (
	"fmt"
	"strings"
	"time"
)

// The plan a nightly writes is state.Plan, beside the other documents a
// run leaves (state.PlanKey is where it is stored).

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
