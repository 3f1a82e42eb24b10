package compare

import (
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// result is a graph won by cand, measured in rounds whose estimates
// spread by ±1 % around meanMs (batch 1).
func result(cand string, meanMs float64) *tuner.Result {
	st := backend.Stats{BatchSize: 1, Samples: 100, MeanMs: meanMs, EstimateMs: meanMs, Throughput: 1000 / meanMs, Interleaved: true,
		RoundMs: []float64{meanMs, meanMs * 1.01, meanMs * 0.99, meanMs * 1.005, meanMs * 0.995}}
	return &tuner.Result{Format: tuner.ResultFormat, Results: []backend.CandidateResult{{Candidate: cand, Status: backend.StatusPassed, Benchmarks: []backend.Stats{st}}},
		Winner: &tuner.Winner{Selection: strategy.Selection{Index: 0, Candidate: cand, BatchSize: 1}}}
}

func TestRuns(t *testing.T) {
	failed := &tuner.Result{Format: tuner.ResultFormat, Results: []backend.CandidateResult{{Candidate: "x", Status: backend.StatusFailed}}}
	a := &Run{Run: "a", BundleDigest: "d", Graphs: []string{"same", "faster", "slower", "failed", "pending", "bad"},
		Results: map[string]*tuner.Result{"same": result("ort:cpu:all", 2), "faster": result("ort:cpu:all", 2), "slower": result("ort:cpu:all", 2),
			"failed": result("ort:cpu:all", 2), "pending": result("ort:cpu:all", 2), "bad": result("ort:cpu:all", 2)},
		Unreadable: map[string]string{}}
	b := &Run{Run: "b", BundleDigest: "d", Graphs: []string{"same", "faster", "slower", "failed", "pending", "bad", "new"},
		Results: map[string]*tuner.Result{"same": result("ort:cpu:all", 2.02), "faster": result("ort:cpu:basic", 1), "slower": result("ort:cpu:all", 3),
			"failed": failed, "new": result("ort:cpu:all", 1)},
		Unreadable: map[string]string{"bad": "malformed"}}
	c := Runs(a, b)
	want := map[string]struct {
		verdict, statusB string
		same             bool
	}{
		"same": {WithinNoise, "done", true}, "faster": {Faster, "done", false}, "slower": {Slower, "done", true},
		"failed": {Missing, "failed", false}, "pending": {Missing, "pending", false}, "bad": {Missing, "unreadable", false}, "new": {Missing, "done", false},
	}
	if !c.SameBundle || len(c.Graphs) != len(want) || c.BeyondNoise != 2 {
		t.Fatalf("comparison: same bundle %v, %d graphs, %d beyond noise; want true, %d, 2", c.SameBundle, len(c.Graphs), c.BeyondNoise, len(want))
	}
	for _, g := range c.Graphs {
		w := want[g.Name]
		if g.Verdict != w.verdict || g.B.Status != w.statusB || g.SameWinner != w.same {
			t.Errorf("graph %s: verdict %s, B %s, same winner %v; want %s, %s, %v", g.Name, g.Verdict, g.B.Status, g.SameWinner, w.verdict, w.statusB, w.same)
		}
		if g.Verdict != Missing && (g.Ratio == nil || g.Ratio.Paired || !(g.Ratio.Lo <= g.Ratio.Value && g.Ratio.Value <= g.Ratio.Hi)) {
			t.Errorf("graph %s: ratio %+v: want an unpaired interval around its value", g.Name, g.Ratio)
		}
	}
	if g := c.Graphs[1]; g.Name != "faster" || g.Ratio.Value < 1.9 || g.Ratio.Value > 2.1 || g.A.Throughput < 490 || g.A.Throughput > 510 || !(g.A.Lo < 500 && g.A.Hi > 500) {
		t.Errorf("faster: %+v ratio %+v: want B/A ≈ 2 and A ≈ 500/s inside its interval", g, g.Ratio)
	}
	if g := c.Graphs[len(c.Graphs)-1]; g.Name != "new" || g.A.Status != "absent" {
		t.Errorf("last graph %+v: want b's new graph, absent from a", g)
	}
}

func TestVerdictText(t *testing.T) {
	for v, want := range map[string]string{WithinNoise: "within noise", Faster: "B faster", Slower: "B slower", Missing: "not comparable", "other": "other"} {
		if got := VerdictText(v); got != want {
			t.Errorf("VerdictText(%q) = %q, want %q", v, got, want)
		}
	}
}
