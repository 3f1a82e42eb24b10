package fleet_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
)

// TestNightlyCarriesUnchanged: on a real redis-server and a file store,
// one class served by one CPU worker. Night 1 is cold; night 2, over the
// unchanged fleet, names night 1's runs as carried and writes nothing but
// its plan: no run.json, state.json, history entry or latest.json move
// (the store's keys and each latest.json's sequence are compared), and its
// morning report says every entry is unchanged and done, with nothing
// spent, every graph's cost saved and no change re-reported. Night 3
// still carries. Then each thing that must make a run does: a changed
// bundle, another bench time, a signing nightly, and a class served by
// two platforms.
func TestNightlyCarriesUnchanged(t *testing.T) {
	t.Parallel()
	orttest.Need(t)
	rdb := ownRedis(t)
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	models := []string{"m0", "m1"}
	bundleOf := func(m string, seed uint64) {
		i := slices.Index(models, m)
		writeBundle(t, filepath.Join(root, "bundles", m), m, []graphPart{{onnxtest.MLP(8+i, 16, 4), []string{fmt.Sprintf("input:1x%d..2x%d", 8+i, 8+i)}, seed}})
	}
	for _, m := range models {
		bundleOf(m, 1)
	}
	s := &nightlyStack{classes: []string{"cpu"}, rdb: rdb, store: store, fleetF: filepath.Join(root, "fleet.yaml"), reg: backend.Registry{"ort": ort.New(ort.Options{})}}
	writeFleet := func(bench string) {
		var fl strings.Builder
		fmt.Fprintf(&fl, "format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\n  bench_time: %s\nmodels:\n", bench)
		for _, m := range models {
			fmt.Fprintf(&fl, "  - model: %s\n    bundle: bundles/%s\n", m, m)
		}
		if err := os.WriteFile(s.fleetF, []byte(fl.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFleet("50ms")
	ctx := context.Background()
	runs := runstate.NewRuns(rdb)
	s.startWorker(t)

	// submit submits the night, signing with signer when not nil, and
	// waits for its runs.
	submit := func(date string, signer *provenance.Signer) *state.Plan {
		t.Helper()
		s.signer = signer
		defer func() { s.signer = nil }()
		plan, _ := s.submit(t, date)
		if _, err := fleet.Wait(ctx, runs, plan, 50*time.Millisecond, fleet.NoReport{}); err != nil {
			t.Fatal(err)
		}
		return plan
	}
	byModel := func(p *state.Plan) map[string]state.PlanEntry {
		out := map[string]state.PlanEntry{}
		for _, e := range p.Entries {
			out[e.Model] = e
		}
		return out
	}
	keys := func() []string {
		t.Helper()
		ks, err := store.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ks)
		return ks
	}
	// sequences are each latest.json's sequence, by key.
	sequences := func() map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		for _, k := range keys() {
			if strings.HasSuffix(k, "/latest.json") {
				var l state.Latest
				if err := artifacts.GetJSON(ctx, store, k, &l); err != nil {
					t.Fatal(err)
				}
				out[k] = l.Sequence
			}
		}
		return out
	}

	night1 := submit("2026-12-01", nil)
	first := byModel(night1)
	for m, e := range first {
		if e.Outcome != state.OutcomeSubmitted || e.Carried {
			t.Fatalf("night 1 %s: %+v, want submitted", m, e)
		}
		var l state.Latest
		if err := artifacts.GetJSON(ctx, store, artifacts.LatestKey(m, "cpu"), &l); err != nil {
			t.Fatal(err)
		}
		var spec jobs.RunSpec
		if err := artifacts.GetJSON(ctx, store, artifacts.RunKey(e.Run), &spec); err != nil {
			t.Fatal(err)
		}
		if l.Run != e.Run || l.Work == "" || l.Work != spec.Work || l.Work == e.Run || l.RunPlatform == "" || l.RunPlatform == "cpu" {
			t.Errorf("night 1 %s: latest.json under the class %+v, run.json's work %q: want run %s, its work id and the platform it ran on", m, l, spec.Work, e.Run)
		}
		raw, err := artifacts.ReadObject(ctx, store, artifacts.LatestKey(m, "cpu"), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.ValidateJSON(schemas.Latest, "", raw); err != nil {
			t.Errorf("latest.json of %s against its schema: %v", m, err)
		}
	}

	// Nights 2 and 3: carried, only the plan written; night 2 as a
	// one-shot producer decides (each bundle identified, not opened),
	// night 3 as a scheduled one (bundles opened through a Memo).
	for _, date := range []string{"2026-12-02", "2026-12-03"} {
		if date == "2026-12-03" {
			s.memo = &bundle.Memo{}
		}
		before, seqBefore := keys(), sequences()
		night := submit(date, nil)
		for m, e := range byModel(night) {
			if !e.Carried || e.Outcome != state.OutcomeUnchanged || e.Run != first[m].Run || e.Graphs != 1 || e.Reused != 1 || e.Enqueued != 0 || e.BundleDigest != first[m].BundleDigest {
				t.Errorf("%s %s: %+v, want unchanged, carried, naming night 1's run %s", date, m, e, first[m].Run)
			}
		}
		after := keys()
		if want := append(slices.Clone(before), state.PlanKey(night.Nightly)); !slices.Equal(after, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s wrote more than its plan: keys before %q, after %q", date, before, after)
		}
		if seq := sequences(); !maps.Equal(seq, seqBefore) {
			t.Errorf("%s moved latest.json: sequences %v → %v", date, seqBefore, seq)
		}
		raw, err := artifacts.ReadObject(ctx, store, state.PlanKey(night.Nightly), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.ValidateJSON(schemas.Plan, "", raw); err != nil {
			t.Errorf("plan.json of %s against its schema: %v", date, err)
		}
		sum, err := report.Summarize(ctx, store, night)
		if err != nil {
			t.Fatal(err)
		}
		if tt := sum.Totals; tt.Entries != 2 || tt.Done != 2 || tt.Unchanged != 2 || tt.Regressions != 0 || tt.CPUSecondsSpent != 0 || tt.CPUSecondsSaved <= 0 || tt.WinnerChanges != 0 || tt.NewVersions != 0 {
			t.Errorf("%s totals %+v: want 2 done and unchanged, nothing spent, something saved, no news", date, tt)
		}
		for _, e := range sum.Entries {
			h, _, err := history.Find(ctx, store, e.Model, "cpu", first[e.Model].Run)
			if err != nil {
				t.Fatal(err)
			}
			if !e.Carried || e.CarriedFrom != night1.Nightly || e.Status != report.StatusDone || e.SpentSeconds != 0 || e.SavedSeconds != h.SpentSeconds+h.SavedSeconds || len(e.Changes) != 0 || e.PreviousRun != "" {
				t.Errorf("%s summary of %s: %+v, want carried from %s, done, 0 spent, %g saved, no change", date, e.Model, e, night1.Nightly, h.SpentSeconds+h.SavedSeconds)
			}
			if len(e.Graphs) != 1 || !e.Graphs[0].Reused || e.Graphs[0].Bench == nil || e.Graphs[0].PreviousBench != nil {
				t.Errorf("%s summary of %s: graphs %+v, want one reused, its bench, nothing compared", date, e.Model, e.Graphs)
			}
		}
		var page bytes.Buffer
		if err := report.RenderHTML(&page, sum, report.Links{}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(page.String(), "carried forward from nightly "+night1.Nightly); n != 2 {
			t.Errorf("%s report.html says carried forward %d time(s), want 2", date, n)
		}
	}

	s.memo = nil

	// What must make a run: each is submitted as ever, not carried.
	notCarried := func(what string, p *state.Plan, models ...string) map[string]state.PlanEntry {
		t.Helper()
		es := byModel(p)
		for _, m := range models {
			if e := es[m]; e.Carried || e.Run == first[m].Run || e.Outcome == state.OutcomeFailed {
				t.Errorf("%s: %s %+v, want a run of its own", what, m, e)
			}
		}
		return es
	}
	// A changed bundle: m1 alone.
	bundleOf("m1", 2)
	es := notCarried("a changed bundle", submit("2026-12-04", nil), "m1")
	if e := es["m0"]; !e.Carried || e.Run != first["m0"].Run {
		t.Errorf("a changed bundle of m1: m0 %+v, want carried", e)
	}
	bundleOf("m1", 1)
	// Another bench time: both (then back).
	writeFleet("60ms")
	notCarried("another bench time", submit("2026-12-05", nil), models...)
	writeFleet("50ms")
	// latest.json now names the 60ms runs: back at 50ms, m0's work is
	// that of night 1 but latest.json's is not: a run again, then carried.
	notCarried("back to the first bench time", submit("2026-12-06", nil), models...)
	if e := byModel(submit("2026-12-07", nil))["m0"]; !e.Carried {
		t.Errorf("the night after: m0 %+v, want carried", e)
	}
	// A signing nightly re-publishes and signs: a run of its own, every
	// graph reused, and a signed pointer.
	signed := notCarried("a signed nightly", submit("2026-12-08", newSigner(t)), models...)
	for m, e := range signed {
		if e.Outcome != state.OutcomeUnchanged || e.Reused != 1 {
			t.Errorf("a signed nightly: %s %+v, want unchanged with its graph reused", m, e)
		}
		if _, err := store.Stat(ctx, artifacts.LatestPointerKey(m, "cpu")); err != nil {
			t.Errorf("a signed nightly: %s has no signed pointer: %v", m, err)
		}
	}
	// A class served by two platforms: a run bound to one, as ever.
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"cpu"}, []string{"other-platform"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Not followed: the other platform's share has no worker.
	night9, _ := s.submit(t, "2026-12-09")
	two := notCarried("a class served by two platforms", night9, models...)
	for m, e := range two {
		if e.Outcome != state.OutcomeSubmitted {
			t.Errorf("two platforms: %s %+v, want submitted (the other platform has no result)", m, e)
		}
	}
}

// newSigner is a fresh ed25519 signing key.
func newSigner(t *testing.T) *provenance.Signer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := provenance.ParseSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return sg
}
