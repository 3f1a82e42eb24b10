package jobs_test

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// A bit-flipped engine blob behind an indexed result is not reused: the
// worker drops the index entry, tunes the graph again, its upload repairs
// the blob, and the new run's state fetches (issue 8, item 6). Before the
// fix the forced run reused the result, and fetch refused its engine.
func TestCorruptIndexedEngineIsRetunedNotReused(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	env := startEmbedded(t)
	ctx := context.Background()
	// One candidate: the re-tune builds the same engine (ONNX Runtime's
	// optimized model is deterministic), so its upload lands on the rotted key.
	cands := "ort:cpu:basic"
	sub, err := env.client.Submit(ctx, open(t, dir), submitOptions(t, strategy.MaxThroughput, cands))
	if err != nil {
		t.Fatal(err)
	}
	st := wait(t, env.client.Runs(), sub.Run)
	if st.Status != runstate.RunDone {
		t.Fatalf("first run %+v", st)
	}
	// Rot graph 0's engine in place: same key, same size, one bit off.
	var res tuner.Result
	if err := artifacts.GetJSON(ctx, env.store, artifacts.GraphResultKey(sub.Run, "0"), &res); err != nil {
		t.Fatal(err)
	}
	eng := artifacts.Ref{SHA256: res.Winner.Engine.SHA256, Size: res.Winner.Engine.Size}
	rc, err := env.store.Get(ctx, eng.Key())
	if err != nil {
		t.Fatal(err)
	}
	good, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x01
	if err := env.store.Put(ctx, eng.Key(), strings.NewReader(string(bad)), int64(len(bad))); err != nil {
		t.Fatal(err)
	}

	o := submitOptions(t, strategy.MaxThroughput, cands)
	o.Force = true
	forced, err := env.client.Submit(ctx, open(t, dir), o)
	if err != nil {
		t.Fatal(err)
	}
	fst := wait(t, env.client.Runs(), forced.Run)
	if fst.Status != runstate.RunDone {
		t.Fatalf("forced run %+v", fst)
	}
	if g0 := fst.Graphs["0"]; strings.HasPrefix(g0.Reason, "reused: ") {
		t.Errorf("graph 0 reused the result whose engine blob is corrupt: %+v", g0)
	}
	for _, g := range []string{"1", "2"} {
		if gs := fst.Graphs[g]; !strings.HasPrefix(gs.Reason, "reused: ") {
			t.Errorf("graph %s: %+v, want it reused (its blobs are intact)", g, gs)
		}
	}
	var again tuner.Result
	if err := artifacts.GetJSON(ctx, env.store, fst.Graphs["0"].ResultKey, &again); err != nil {
		t.Fatal(err)
	}
	if again.Winner.Engine.SHA256 != eng.SHA256 {
		t.Logf("the re-tune built another engine (%s); the rotted blob stays unreferenced", again.Winner.Engine.SHA256)
	} else if err := artifacts.VerifyBlob(ctx, env.store, eng); err != nil {
		t.Errorf("the re-tune's upload did not repair the engine blob: %v", err)
	}
	if _, err := artifacts.Fetch(ctx, env.store, "tests.ThreeGraphs", "cpu", forced.Run, filepath.Join(t.TempDir(), "deploy")); err != nil {
		t.Errorf("fetch of the forced run: %v", err)
	}
}
