package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/parallel"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/state"
)

// BenchmarkNightlySubmitStored measures the unchanged night of a fleet
// whose bundles are in the store (bundle: store:bundles/M, the shape of
// the Kubernetes CronJob's nightly, a one-shot process with no volume)
// over TUNEFLEET_SUBMIT_SIZES one-graph models on a file store and a real
// redis-server, every model carrying its run forward, in
// TUNEFLEET_SUBMIT_ROUNDS rounds of three legs each:
//
//   - carried from the stored index: each model's index, bundle.json and
//     latest.json read, no bundle fetched;
//   - the same night with fleet.Options.OpenCarried: every bundle fetched
//     and validated first, as every night did before the index decided;
//   - the floor: what deciding cannot do without, each model's index and
//     latest.json read (two small objects), 16 models at a time.
//
// It prints the carried night's time a model against the floor (target ≤
// 2×, undecided when the rounds' spread turns it), against fetching round
// by round, and against issue 35's 0.1 ms a model.
// TUNEFLEET_SUBMIT_PROFILE=DIR writes the first round's carried night's
// CPU profile to DIR/stored-N.pprof.
func BenchmarkNightlySubmitStored(b *testing.B) {
	needScaleBench(b)
	orttest.Need(b)
	sizes, rounds := submitSizes(b)
	rdb := ownRedis(b)
	tmpl, man := identityTemplate(b)
	root := b.TempDir()
	store := localStore(b, filepath.Join(root, "store"))
	seedWork(b, rdb, store, tmpl, man, root)

	fleets := map[int]string{}
	for _, n := range sizes {
		f := writeSubmitFleet(b, tmpl, man, filepath.Join(root, fmt.Sprintf("stored%d", n)), fmt.Sprintf("stor%d", n), n)
		fleets[n] = pushSubmitFleet(b, store, f, n)
		// The first night starts each model's history and latest.json.
		_, p := submitNight(b, rdb, store, fleets[n], time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "")
		wantOutcomes(b, p, state.OutcomeUnchanged)
		wantCarried(b, p, false)
	}
	type legs struct{ carried, fetched, floor []time.Duration }
	got := map[int]*legs{}
	b.ResetTimer()
	for r := range rounds {
		for _, n := range sizes {
			if got[n] == nil {
				got[n] = &legs{}
			}
			day := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r)
			prof := ""
			if dir := os.Getenv("TUNEFLEET_SUBMIT_PROFILE"); dir != "" && r == 0 {
				prof = filepath.Join(dir, fmt.Sprintf("stored-%d.pprof", n))
			}
			took, p := submitNightO(b, rdb, store, fleets[n], fleet.Options{Date: day}, prof)
			wantOutcomes(b, p, state.OutcomeUnchanged)
			wantCarried(b, p, true)
			got[n].carried = append(got[n].carried, took)

			took, p = submitNightO(b, rdb, store, fleets[n], fleet.Options{Date: day.AddDate(1, 0, 0), OpenCarried: true}, "")
			wantOutcomes(b, p, state.OutcomeUnchanged)
			wantCarried(b, p, true)
			got[n].fetched = append(got[n].fetched, took)

			got[n].floor = append(got[n].floor, storedFloor(b, store, fmt.Sprintf("stor%d", n), n))
		}
	}
	b.StopTimer()
	for _, n := range sizes {
		l := got[n]
		o, fo, fe := slices.Sorted(slices.Values(l.carried)), slices.Sorted(slices.Values(l.floor)), slices.Sorted(slices.Values(l.fetched))
		ratio, why := toFloor(o, fo)
		var byRound []float64
		for i := range l.carried {
			byRound = append(byRound, l.carried[i].Seconds()/l.fetched[i].Seconds())
		}
		slices.Sort(byRound)
		fmt.Printf("nightly submit, unchanged night of %d stored one-graph models, carried from the index: %.3f ms a model (%v), floor (index and latest.json read) %.3f ms: ratio %.2f (target ≤ 2, met: %s)\n",
			n, per(o[0], n), o[0].Round(time.Millisecond), per(fo[0], n), ratio, verdict.Of(ratio <= 2, why))
		fmt.Printf("nightly submit, unchanged night of %d stored models, carried from the index vs every bundle fetched first (as before): %.3f vs %.3f ms a model (%v vs %v); ratio by round %.3f–%.3f\n",
			n, per(o[0], n), per(fe[0], n), o[0].Round(time.Millisecond), fe[0].Round(time.Millisecond), byRound[0], byRound[len(byRound)-1])
		fmt.Printf("nightly submit, unchanged night of %d stored models: %v, %.3f ms a model against issue 35's 0.1 ms (met: %s)\n",
			n, o[0].Round(time.Millisecond), per(o[0], n), verdict.Of(per(o[0], n) <= 0.1))
		b.ReportMetric(per(o[0], n), fmt.Sprintf("stored-ms/model@%d", n))
		b.ReportMetric(per(fe[0], n), fmt.Sprintf("fetched-ms/model@%d", n))
	}
}

// pushSubmitFleet pushes every model's bundle of f to the store
// (bundlestore.Push, 16 at a time) and writes a fleet file naming them
// as store:bundles/M, whose path it returns.
func pushSubmitFleet(tb testing.TB, store artifacts.Store, f *submitFleet, n int) string {
	tb.Helper()
	ctx := context.Background()
	if err := parallel.ForEach(ctx, n, fleet.DefaultParallel, func(ctx context.Context, k int) error {
		b, err := bundle.Open(filepath.Join(f.dir, "bundles", f.model(k)))
		if err != nil {
			return err
		}
		_, err = bundlestore.Push(ctx, store, b)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	var yaml strings.Builder
	yaml.WriteString("format: tunefleet.fleet/v1\nclasses: [cpu]\ndefaults:\n  targets: [cpu]\n  strategy: first-wins\n  candidates: [ort:cpu:basic]\n  bench_time: 100ms\nmodels:\n")
	for k := range n {
		fmt.Fprintf(&yaml, "  - model: %s\n    bundle: store:bundles/%s\n", f.model(k), f.model(k))
	}
	path := filepath.Join(f.dir, "fleet-stored.yaml")
	if err := os.WriteFile(path, []byte(yaml.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// storedFloor reads, for each of the n models prefix_00000…, its stored
// bundle's index and its latest.json under the class, 16 models at a
// time: what an unchanged night of stored bundles cannot do without.
func storedFloor(tb testing.TB, store artifacts.Store, prefix string, n int) time.Duration {
	ctx := context.Background()
	began := time.Now()
	err := parallel.ForEach(ctx, n, fleet.DefaultParallel, func(ctx context.Context, k int) error {
		model := fmt.Sprintf("%s_%05d", prefix, k)
		if _, err := artifacts.ReadObject(ctx, store, bundlestore.LatestKey(model), artifacts.MaxJSONSize); err != nil {
			return err
		}
		_, err := artifacts.ReadObject(ctx, store, artifacts.LatestKey(model, "cpu"), artifacts.MaxJSONSize)
		return err
	})
	took := time.Since(began)
	if err != nil {
		tb.Fatal(err)
	}
	return took
}
