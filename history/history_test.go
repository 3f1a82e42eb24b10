package history_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
)

func bench(batch int, mean, p50, p90, cv float64) *history.Bench {
	return &history.Bench{BatchSize: batch, Samples: 200, MeanMs: mean, P50Ms: p50, P90Ms: p90, P99Ms: p90 * 1.2, CV: cv,
		Throughput: float64(batch) * 1000 / mean, Stable: true}
}

func tail(b *history.Bench, calls int) *history.Bench { b.Samples = calls; return b }

func TestMovedUsesEachMeasurementsSpread(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after *history.Bench
		want          int
	}{
		{"identical", bench(1, 1, 1, 1.1, 0.05), bench(1, 1, 1, 1.1, 0.05), 0},
		{"tight and 30% slower", bench(1, 1, 1, 1.05, 0.03), bench(1, 1.3, 1.3, 1.35, 0.03), +1},
		{"noisy and 30% slower: within its spread", bench(1, 1, 0.9, 1.6, 0.4), bench(1, 1.3, 1.2, 2, 0.4), 0},
		{"tight and 30% faster", bench(1, 1.3, 1.3, 1.35, 0.03), bench(1, 1, 1, 1.05, 0.03), -1},
		{"beyond 2 sigma but the new median inside the old p90", bench(1, 1, 1, 1.2, 0.01), bench(1, 1.1, 1.1, 1.15, 0.01), 0},
		{"per sample: batch 4 at 4x the latency is the same speed", bench(1, 1, 1, 1.05, 0.03), bench(4, 4, 4, 4.2, 0.03), 0},
		{"per sample: batch 4 at 8x the latency is slower", bench(1, 1, 1, 1.05, 0.03), bench(4, 8, 8, 8.4, 0.03), +1},
		{"nothing measured before", nil, bench(1, 1, 1, 1, 0.1), 0},
		{"zero CV, one percent slower, medians apart: under MinMove", bench(1, 1, 1, 1, 0), bench(1, 1.01, 1.01, 1.01, 0), 0},
		{"zero CV, six percent slower, medians apart", bench(1, 1, 1, 1, 0), bench(1, 1.06, 1.06, 1.06, 0), +1},
		{"a long tail before does not hide a tenfold slowdown", tail(bench(4, 0.012, 0.005, 0.008, 2.5), 124), bench(4, 0.112, 0.104, 0.134, 0.15), +1},
		{"few calls: the mean's standard error is wide", tail(bench(1, 1, 1, 1.3, 0.5), 4), tail(bench(1, 1.4, 1.4, 1.6, 0.5), 4), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := history.Moved(tc.before, tc.after); got != tc.want {
				t.Errorf("Moved = %d, want %d", got, tc.want)
			}
		})
	}
}

func entry(run, platform string, graphs ...history.Graph) *history.Entry {
	return &history.Entry{Format: history.Format, Model: "m", Platform: platform, Target: "cpu", Run: run, Status: "done", Graphs: graphs}
}

func done(name, cand string, b *history.Bench) history.Graph {
	return history.Graph{Name: name, Status: history.GraphDone, Candidate: cand, Bench: b}
}

func failed(name string) history.Graph {
	return history.Graph{Name: name, Status: history.GraphFailed, Failure: &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "output 0 differs\nmore"}}
}

func TestCompareListsWhatMoved(t *testing.T) {
	fast, slow := bench(1, 1, 1, 1.05, 0.02), bench(1, 2, 2, 2.1, 0.02)
	type want struct {
		kind       string
		regression bool
	}
	for _, tc := range []struct {
		name      string
		prev, cur *history.Entry
		want      []want
	}{
		{"first entry", nil, entry("r1", "p", done("0", "ort:cpu:basic", fast)), nil},
		{"nothing moved", entry("r1", "p", done("0", "a", fast)), entry("r2", "p", done("0", "a", fast)), nil},
		{"slower", entry("r1", "p", done("0", "a", fast)), entry("r2", "p", done("0", "a", slow)), []want{{history.ChangeSlower, true}}},
		{"faster, winner changed", entry("r1", "p", done("0", "a", slow)), entry("r2", "p", done("0", "b", fast)),
			[]want{{history.ChangeWinner, false}, {history.ChangeFaster, false}}},
		{"newly failing", entry("r1", "p", done("0", "a", fast)), entry("r2", "p", failed("0")), []want{{history.ChangeNewlyFailing, true}}},
		{"recovered", entry("r1", "p", failed("0")), entry("r2", "p", done("0", "a", fast)), []want{{history.ChangeRecovered, false}}},
		{"still failing", entry("r1", "p", failed("0")), entry("r2", "p", failed("0")), []want{{history.ChangeStillFailing, false}}},
		{"graph added and removed", entry("r1", "p", done("0", "a", fast)), entry("r2", "p", done("1", "a", fast)),
			[]want{{history.ChangeNewGraph, false}, {history.ChangeRemovedGraph, false}}},
		{"other platform: timings not compared", entry("r1", "p", done("0", "a", fast)), entry("r2", "q", done("0", "a", slow)),
			[]want{{history.ChangePlatformMoved, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := history.Compare(tc.prev, tc.cur)
			if len(got) != len(tc.want) {
				t.Fatalf("changes %+v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				if got[i].Kind != w.kind || got[i].Regression != w.regression || got[i].Detail == "" {
					t.Errorf("change %d: %+v, want %v", i, got[i], w)
				}
			}
		})
	}
}

func TestAppendWritesOnceAndListsInTimeOrder(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	// Written out of time order; run ids that sort against time.
	for i, run := range []string{"zz", "aa", "mm"} {
		e := entry(run, "p", done("0", "a", bench(1, float64(i+1), 1, 1, 0.1)))
		e.Created = t0.Add(time.Duration([]int{2, 0, 1}[i]) * time.Hour)
		if ok, err := history.Append(ctx, store, e); err != nil || !ok {
			t.Fatalf("append %s: %v %v", run, ok, err)
		}
	}
	// A second append of a run's entry (a repeated finalize) writes nothing.
	again := entry("aa", "p", done("0", "other", nil))
	again.Created = t0
	if ok, err := history.Append(ctx, store, again); err != nil || ok {
		t.Fatalf("second append: %v %v, want nothing written", ok, err)
	}
	list, err := history.List(ctx, store, "m", "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, e := range list {
		runs = append(runs, e.Run)
	}
	if len(runs) != 3 || runs[0] != "aa" || runs[1] != "mm" || runs[2] != "zz" || list[0].Graphs[0].Candidate != "a" {
		t.Fatalf("history %v (first %+v), want aa mm zz with the first write kept", runs, list[0].Graphs)
	}
	cur, prev, err := history.Find(ctx, store, "m", "p", "zz")
	if err != nil || cur.Run != "zz" || prev == nil || prev.Run != "mm" {
		t.Fatalf("find zz: %+v %+v %v", cur, prev, err)
	}
	if _, _, err := history.Find(ctx, store, "m", "p", "m"); err == nil {
		t.Fatal("found run m, a suffix of mm")
	}
	if last, _ := history.List(ctx, store, "m", "p", 1); len(last) != 1 || last[0].Run != "zz" {
		t.Fatalf("limit 1: %+v", last)
	}
}

func TestRunOf(t *testing.T) {
	for key, want := range map[string]string{
		"models/m/p/history/20261201T020000.000000000Z-abc-def.json": "abc-def",
		"models/m/p/history/notes.json":                              "",
		"models/m/p/history/20261201T020000.000000000Z-.json":        "",
	} {
		if got := history.RunOf(key); got != want {
			t.Errorf("RunOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// KeysByModel groups one listing as Keys lists each model's history on
// each platform, leaving out what is not an entry; Newest compares the
// newest entry with the one before it of its class, within the depth.
func TestKeysByModelAndNewest(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for i, c := range []struct{ model, platform, run, target string }{
		{"m", "p", "r1", "cpu"}, {"m", "p", "r2", "gpu.x"}, {"m", "p", "r3", "gpu.x"}, {"m", "p", "r4", "cpu"},
		{"m", "q", "r5", "cpu"}, {"n", "p", "r6", "cpu"},
	} {
		e := entry(c.run, c.platform, done("0", "a", nil))
		e.Model, e.Target, e.Created = c.model, c.target, t0.Add(time.Duration(i)*time.Minute)
		if _, err := history.Append(ctx, store, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, junk := range []string{"models/m/p/history/notes.json", "models/m/p/history/sub/x.json", "models/m/p/latest.json"} {
		if err := artifacts.PutJSON(ctx, store, junk, map[string]string{}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := history.KeysByModel(ctx, store, "models/")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ model, platform string }{{"m", "p"}, {"m", "q"}, {"n", "p"}} {
		want, err := history.Keys(ctx, store, c.model, c.platform)
		if err != nil {
			t.Fatal(err)
		}
		if got := all[c.model][c.platform]; !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("KeysByModel[%s][%s] = %v, Keys = %v", c.model, c.platform, got, want)
		}
	}
	if len(all) != 2 || len(all["m"]) != 2 || len(all["m"]["p"]) != 4 {
		t.Errorf("KeysByModel = %v, want m on p (4 entries, no junk) and q, n on p", all)
	}
	if one, _ := history.KeysByModel(ctx, store, "models/n/"); len(one) != 1 || len(one["n"]["p"]) != 1 {
		t.Errorf("KeysByModel(models/n/) = %v", one)
	}
	keys := all["m"]["p"]
	for _, c := range []struct {
		depth int
		prev  string
	}{{0, "r1"}, {3, "r1"}, {2, ""}} {
		cur, prev, err := history.Newest(ctx, store, keys, c.depth)
		if err != nil || cur.Run != "r4" || (prev == nil) != (c.prev == "") || prev != nil && prev.Run != c.prev {
			t.Errorf("Newest(depth %d) = %+v, %+v, %v; want r4 compared with %q", c.depth, cur, prev, err, c.prev)
		}
	}
	if _, _, err := history.Newest(ctx, store, nil, 0); !errors.Is(err, history.ErrNoEntry) {
		t.Errorf("Newest of no keys: %v", err)
	}
}

// rounds is a measurement of batch 1 taken in five rounds whose robust
// latencies spread by ±spread around ms.
func rounds(ms, spread float64) *history.Bench {
	b := bench(1, ms, ms, ms*1.05, 0.02)
	b.EstimateMs = ms
	b.RoundMs = []float64{ms * (1 - spread), ms * (1 + spread), ms, ms * (1 - spread/2), ms * (1 + spread/2)}
	return b
}

// A nightly where a tie's winner flips (the tie-break picked another of
// the tied, or the other tied) is no "winner changed"; a change to a
// candidate that was not tied is (issue 19).
func TestCompareIgnoresTiesAndNoise(t *testing.T) {
	tie := func(cand string, b *history.Bench, tied ...string) history.Graph {
		g := done("0", cand, b)
		g.Tied = tied
		return g
	}
	same := rounds(1, 0.03)
	for _, tc := range []struct {
		name      string
		prev, cur history.Graph
		want      []string
	}{
		{"tie last night, the other of the tied tonight", tie("a", same, "a", "b"), done("0", "b", rounds(1.01, 0.03)), nil},
		{"a win last night, tonight a tie won by the other", done("0", "a", same), tie("b", rounds(0.99, 0.03), "b", "a"), nil},
		{"a real change of winner", tie("a", same, "a", "b"), done("0", "c", rounds(1, 0.03)), []string{history.ChangeWinner}},
		{"3 % slower within the rounds' spread", done("0", "a", same), done("0", "a", rounds(1.03, 0.03)), nil},
		{"30 % slower beyond it", done("0", "a", same), done("0", "a", rounds(1.3, 0.03)), []string{history.ChangeSlower}},
		{"30 % faster beyond it", done("0", "a", rounds(1.3, 0.03)), done("0", "a", same), []string{history.ChangeFaster}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kinds []string
			for _, c := range history.Compare(entry("r1", "p", tc.prev), entry("r2", "p", tc.cur)) {
				kinds = append(kinds, c.Kind)
			}
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("changes %v, want %v", kinds, tc.want)
			}
		})
	}
}

func TestSettingsChangeIsNoRegression(t *testing.T) {
	base := history.Settings{Strategy: "max-throughput", Candidates: []string{"ort:cpu:basic", "ort:cpu:all"}, Bench: "bench time 20ms",
		Toolchain: map[string]string{"ort_version": "1.24.1"}}
	with := func(f func(s *history.Settings)) *history.Settings {
		s := base
		s.Candidates = slices.Clone(base.Candidates)
		f(&s)
		return &s
	}
	for _, tc := range []struct {
		name       string
		prev, cur  *history.Settings
		cur0       history.Graph
		wantKind   string
		wantDetail string
		regression bool
	}{
		{"same settings: newly failing", &base, with(func(*history.Settings) {}), failed("0"), history.ChangeNewlyFailing, "", true},
		{"candidates changed: settings changed", &base, with(func(s *history.Settings) { s.Candidates = []string{"ort:cpu:disabled"} }),
			failed("0"), history.ChangeSettings, "candidates ort:cpu:basic,ort:cpu:all → ort:cpu:disabled", false},
		{"tolerances changed", &base, with(func(s *history.Settings) { s.Tolerances = "0123456789ab" }), failed("0"), history.ChangeSettings, "tolerances none → 0123456789ab", false},
		{"bench settings changed", &base, with(func(s *history.Settings) { s.Bench = "bench time 50ms" }),
			done("0", "a", bench(1, 2, 2, 2.1, 0.01)), history.ChangeSettings, "bench settings bench time 20ms → bench time 50ms", false},
		{"toolchain changed", &base, with(func(s *history.Settings) { s.Toolchain = map[string]string{"ort_version": "1.25.0"} }),
			done("0", "a", bench(1, 2, 2, 2.1, 0.01)), history.ChangeSettings, "toolchain ort 1.24.1 → 1.25.0", false},
		{"an entry from before settings were kept: compared as ever", nil, &base, failed("0"), history.ChangeNewlyFailing, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := entry("r1", "p", done("0", "a", bench(1, 1, 1, 1.05, 0.01)))
			prev.Settings = tc.prev
			cur := entry("r2", "p", tc.cur0)
			cur.Settings = tc.cur
			changes := history.Compare(prev, cur)
			var graph *history.Change
			var detail string
			for i, c := range changes {
				if c.Graph == "0" {
					graph = &changes[i]
				}
				if c.Graph == "" && c.Kind == history.ChangeSettings {
					detail = c.Detail
				}
			}
			if graph == nil || graph.Kind != tc.wantKind || graph.Regression != tc.regression {
				t.Fatalf("changes %+v, want graph 0 %s (regression %v)", changes, tc.wantKind, tc.regression)
			}
			if tc.wantDetail != "" && !strings.Contains(detail, tc.wantDetail) {
				t.Errorf("settings change %q, want it to say %q", detail, tc.wantDetail)
			}
			if tc.wantDetail == "" && detail != "" {
				t.Errorf("a settings change %q where none was", detail)
			}
		})
	}
}

// A graph whose files or shapes changed is a new version: its figures are
// not compared for a regression, a change of winner is counted whatever
// the old winner tied with, and the entry says what changed (issue 30:
// a replaced bundle was paged as "graph 0 slower -66.6%" and its change
// of winner among last night's tie counted as none). The same version
// measured again (--remeasure) is compared as ever.
func TestNewVersionIsNoRegression(t *testing.T) {
	fast, slow := rounds(1, 0.02), rounds(3, 0.02)
	g := func(name, digest, shapes, cand string, b *history.Bench, tied ...string) history.Graph {
		gr := done(name, cand, b)
		gr.Digest, gr.Shapes, gr.Tied = digest, shapes, tied
		return gr
	}
	at := func(run, bundle string, remeasure bool, graphs ...history.Graph) *history.Entry {
		e := entry(run, "p", graphs...)
		e.BundleDigest, e.Remeasure = bundle, remeasure
		return e
	}
	const d1, d2 = "sha256:1111111111111111aaaa", "sha256:2222222222222222bbbb"
	const s1, s2 = "input:1x16..4x16", "input:1x16..8x16"
	prev := at("r1", "sha256:b1", false, g("0", d1, s1, "a", fast, "a", "b", "c"), g("1", d1, s1, "a", fast))
	for _, tc := range []struct {
		name        string
		cur         *history.Entry
		want        []string // the kinds, in order
		regressions int
		detail      string // in the entry's new_version change
	}{
		{"same version, slower: a regression",
			at("r2", "sha256:b1", false, g("0", d1, s1, "a", slow), g("1", d1, s1, "a", fast)),
			[]string{history.ChangeSlower}, 1, ""},
		{"graph replaced, slower: a new version, no regression",
			at("r2", "sha256:b2", false, g("0", d2, s1, "a", slow), g("1", d1, s1, "a", fast)),
			[]string{history.ChangeNewVersion, history.ChangeNewVersion}, 0, "bundle sha256:b1 → sha256:b2; graph 0 (files sha256:111111111111 → sha256:222222222222)"},
		{"graph replaced, another of last night's tie wins: a counted winner change",
			at("r2", "sha256:b2", false, g("0", d2, s1, "c", slow), g("1", d1, s1, "a", fast)),
			[]string{history.ChangeNewVersion, history.ChangeNewVersion, history.ChangeWinner}, 0, "graph 0 (files"},
		{"shapes changed: a new version",
			at("r2", "sha256:b2", false, g("0", d1, s2, "a", slow), g("1", d1, s1, "a", fast)),
			[]string{history.ChangeNewVersion, history.ChangeNewVersion}, 0, "shapes input:1x16..4x16 → input:1x16..8x16"},
		{"the other graph replaced: this one's slowdown is still a regression",
			at("r2", "sha256:b2", false, g("0", d1, s1, "a", slow), g("1", d2, s1, "a", fast)),
			[]string{history.ChangeNewVersion, history.ChangeSlower, history.ChangeNewVersion}, 1, "graph 1 (files"},
		{"--remeasure, same version, slower: measured again, a regression",
			at("r2", "sha256:b1", true, g("0", d1, s1, "a", slow), g("1", d1, s1, "a", fast)),
			[]string{history.ChangeRemeasured, history.ChangeSlower, history.ChangeRemeasured}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := history.Compare(prev, tc.cur)
			var kinds []string
			detail := ""
			for _, c := range changes {
				kinds = append(kinds, c.Kind)
				if c.Kind == history.ChangeNewVersion && c.Graph == "" {
					detail = c.Detail
				}
			}
			if !slices.Equal(kinds, tc.want) || history.Regressions(changes) != tc.regressions {
				t.Fatalf("changes %+v: kinds %v, want %v with %d regression(s)", changes, kinds, tc.want, tc.regressions)
			}
			if !strings.Contains(detail, tc.detail) || (tc.detail == "") != (detail == "") {
				t.Errorf("new version %q, want it to say %q", detail, tc.detail)
			}
		})
	}
	// Entries written before graphs' digests were kept: the bundle decides.
	old := at("r1", "sha256:b1", false, done("0", "a", fast))
	if kinds := history.Compare(old, at("r2", "sha256:b2", false, done("0", "a", slow))); len(kinds) != 2 || kinds[1].Kind != history.ChangeNewVersion ||
		kinds[1].Was != history.ChangeSlower || history.Regressions(kinds) != 0 {
		t.Errorf("an old entry's bundle replaced: %+v, want a new version that was slower, no regression", kinds)
	}
}

// TestToleranceChangeShowsValues: a change of a graph's tolerances is
// said value by value, old → new per output, as history, compare, the
// morning report and the webhook show it (on main: two digests,
// "tolerances 3f2a… → 9c1b…", which say nothing a person can check).
func TestToleranceChangeShowsValues(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	withTol := func(run string, tol map[string]bundle.Tolerance) *history.Entry {
		e := entry(run, "p", done("0", "a", bench(1, 1, 1, 1.05, 0.01)))
		e.Settings = &history.Settings{Strategy: "max-throughput", Candidates: []string{"ort:cpu:basic"}}
		return e.WithRun([]bundle.Graph{{Name: "0", Tolerances: tol}}, 0, 0, false)
	}
	for _, tc := range []struct {
		name      string
		prev, cur map[string]bundle.Tolerance
		want      string
	}{
		{"atol loosened", map[string]bundle.Tolerance{"y": {ATol: f(1e-5)}}, map[string]bundle.Tolerance{"y": {ATol: f(1e-3)}},
			"tolerances graph 0 output y atol 1e-05 → 0.001"},
		{"rtol added", map[string]bundle.Tolerance{"y": {ATol: f(1e-5)}}, map[string]bundle.Tolerance{"y": {ATol: f(1e-5), RTol: f(0.01)}},
			"tolerances graph 0 output y rtol default → 0.01"},
		{"declared where none was", nil, map[string]bundle.Tolerance{"logits": {RTol: f(0.001)}},
			"tolerances graph 0 output logits rtol default → 0.001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff := strings.Join(history.SettingsDiff(withTol("r1", tc.prev).Settings, withTol("r2", tc.cur).Settings), "; ")
			if diff != tc.want {
				t.Errorf("settings diff %q, want %q", diff, tc.want)
			}
		})
	}
}
