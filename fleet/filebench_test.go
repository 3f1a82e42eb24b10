package fleet_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
)

// fleetFile writes a fleet file of n models (defaults, a bundle and one
// setting of their own each).
func fleetFile(n int) []byte {
	var b strings.Builder
	b.WriteString("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu, gpu.h100]\n  strategy: max-throughput\n  candidates: [ort:cpu:basic, ort:cpu:all]\n  bench_time: 2s\nmodels:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - model: team%d.model%d\n    bundle: bundles/m%d.tgz\n    priority: %d\n", i%37, i, i, i%5)
	}
	return []byte(b.String())
}

// BenchmarkFleetFileValidation parses and checks (every key, setting and
// entry; no bundle opened) fleet files of 1,000 and 10,000 models, five
// rounds each, and prints each size's best time, its cost per model and
// the ratio of the two per-model costs: the check is linear when that
// ratio stays near 1 (target ≤ 1.5), and 10,000 models take about a
// second (target ≤ 1.5 s). A verdict that the rounds' spread could turn
// is undecided.
func BenchmarkFleetFileValidation(b *testing.B) {
	sizes := []int{1000, 10000}
	// The fastest and the third fastest of five rounds (the first rounds
	// pay for the heap's growth): the verdict must be the same with
	// either, or the machine's noise could have decided it.
	best, third := map[int]time.Duration{}, map[int]time.Duration{}
	for _, n := range sizes {
		data := fleetFile(n)
		var rounds []time.Duration
		for range 5 {
			began := time.Now()
			f, err := fleet.Parse("fleet.yaml", data)
			if err != nil {
				b.Fatal(err)
			}
			es, err := f.Entries()
			if err != nil || len(es) != 2*n {
				b.Fatalf("%d models: %d entries, %v", n, len(es), err)
			}
			rounds = append(rounds, time.Since(began))
		}
		slices.Sort(rounds)
		best[n], third[n] = rounds[0], rounds[2]
	}
	judge := func(small, large time.Duration) (float64, bool) {
		ratio := (float64(large) / 10000) / (float64(small) / 1000)
		return ratio, ratio <= 1.5 && large <= 1500*time.Millisecond
	}
	ratio, met := judge(best[1000], best[10000])
	// The ratio's noise either way: a slow large round over a fast small
	// one, and the reverse.
	_, metHi := judge(best[1000], third[10000])
	_, metLo := judge(third[1000], best[10000])
	why := ""
	if met != metHi || met != metLo {
		why = fmt.Sprintf("the verdict changes within the rounds' spread (10,000 models: %s to %s; 1,000: %s to %s): the machine's load changed",
			best[10000].Round(time.Millisecond), third[10000].Round(time.Millisecond), best[1000].Round(time.Millisecond), third[1000].Round(time.Millisecond))
	}
	for _, n := range sizes {
		b.Logf("fleet file of %6d models: %8s (%.1f µs a model)", n, best[n].Round(time.Millisecond), float64(best[n])/float64(n)/1e3)
	}
	b.Logf("fleet file validation: 10,000 models in %s, per-model cost 10,000 ÷ 1,000 = %.2f (target ≤ 1.5 s and ≤ 1.5: linear); met: %s",
		best[10000].Round(time.Millisecond), ratio, verdict.Of(met, why))
	b.ReportMetric(ratio, "per-model-ratio")
}
