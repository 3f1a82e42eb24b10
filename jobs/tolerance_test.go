package jobs_test

import (
	"context"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// --atol/--rtol on submit: the overrides reach the workers (a difference
// they cover passes), make another run than the bundle without them, and
// leave the caller's manifest as it was.
func TestToleranceOverridesAreTheirOwnRun(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	perturb(t, dir) // graph 0's reference is off by 1
	env := startEmbedded(t)
	ctx := context.Background()
	plain, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.FirstWins, "ort:cpu:basic"))
	if err != nil {
		t.Fatal(err)
	}
	if st := wait(t, env.client.Runs(), plain.Run); st.Status != runstate.RunFailed {
		t.Fatalf("the perturbed bundle's run is %s, want failed", st.Status)
	}
	b := open(t, dir)
	opts := submitOptions(t, strategy.FirstWins, "ort:cpu:basic")
	opts.Tolerances = []bundle.ToleranceOverride{{Output: "output", Value: 2}}
	loose, err := env.client.Submit(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if loose.Run == plain.Run || !loose.Created {
		t.Fatalf("with --atol: %+v, want a new run beside %s", loose, plain.Run)
	}
	if st := wait(t, env.client.Runs(), loose.Run); st.Status != runstate.RunDone {
		t.Fatalf("with --atol output=2 the run is %s (%+v), want done", st.Status, st.Graphs["0"])
	}
	if b.Manifest.Graphs[0].Tolerances != nil {
		t.Errorf("Submit changed the caller's manifest: %+v", b.Manifest.Graphs[0].Tolerances)
	}
	again, err := env.client.Submit(ctx, open(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != loose.Run || again.Created {
		t.Fatalf("the same overrides again: %+v, want run %s again", again, loose.Run)
	}
	opts.Tolerances = []bundle.ToleranceOverride{{Output: "logits_typo", Value: 2}}
	if _, err := env.client.Submit(ctx, open(t, dir), opts); err == nil {
		t.Fatal("an override naming no output was accepted")
	}
}
