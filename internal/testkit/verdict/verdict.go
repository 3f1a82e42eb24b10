package verdict

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Far is how far from nominal a task may run before a row refuses a
// verdict: a factor either way. Within it the machine's noise is what the
// rows' own targets allow for; past it the row measures the machine.
const Far = 3.0

// Of is a row's verdict: "undecided (why; why)" if any why is not empty,
// else "yes" or "NO" by met.
func Of(met bool, whys ...string) string {
	var ws []string
	for _, w := range whys {
		if w != "" {
			ws = append(ws, w)
		}
	}
	switch {
	case len(ws) > 0:
		return "undecided (" + strings.Join(ws, "; ") + ")"
	case met:
		return "yes"
	}
	return "NO"
}

// Nominal is the why of a row whose task of what ran took, against its
// nominal size: empty within a factor Far of it either way.
func Nominal(what string, took, nominal time.Duration) string {
	if nominal <= 0 || took <= 0 {
		return ""
	}
	r := float64(took) / float64(nominal)
	if r <= Far && r >= 1/Far {
		return ""
	}
	return fmt.Sprintf("a %s task took %v, %.1f× its nominal %v: the machine is loaded", what, took.Round(time.Millisecond), r, nominal)
}

// Drift is the why of a row that compares two legs measured at different
// times when the same work took ratio (second ÷ first) times as long in
// the second: empty within limit either way.
func Drift(what string, ratio, limit float64) string {
	if ratio <= 0 || (ratio <= limit && ratio >= 1/limit) {
		return ""
	}
	return fmt.Sprintf("%s took %.2f× as long as before: the machine's speed changed", what, ratio)
}

// Spread is the why of a row whose rounds of the same work (xs, rates or
// times, all > 0) differ by more than limit between the fastest and the
// slowest: the machine's load changed while it measured.
func Spread(what string, xs []float64, limit float64) string {
	if len(xs) < 2 {
		return ""
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo <= 0 || hi/lo <= limit {
		return ""
	}
	return fmt.Sprintf("%s varied %.1f× across rounds: the machine's load changed", what, hi/lo)
}

// LoadAverage is the one-minute load average (0 where /proc has none):
// what a benchmark compares with the cores before it trusts a wall clock.
func LoadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
