package runstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
)

// A finished graph's task asks for finalize (Begin's FinalizeTarget, and
// TaskState's) until a finalize task of the run's current generation is
// recorded as queued; a new generation asks again, and a final run never.
func TestFinalizeIsAskedForUntilItIsQueued(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	run := fmt.Sprintf("fq-%d", time.Now().UnixNano())
	if _, err := runs.Create(ctx, run, "m", "cpu", []string{"0", "1"}); err != nil {
		t.Fatal(err)
	}
	complete := func(g string) {
		t.Helper()
		if _, _, err := runs.CompleteGraph(ctx, run, g, runstate.GraphStatus{Status: runstate.GraphDone}); err != nil {
			t.Fatal(err)
		}
	}
	asked := func(want string, wantGen int) func(t *testing.T) {
		return func(t *testing.T) {
			b, err := runs.Begin(ctx, run, "0", "cpu-x", "w")
			if err != nil {
				t.Fatal(err)
			}
			if b.Pending || b.FinalizeTarget != want || (want != "" && b.FinalizeGen != wantGen) {
				t.Errorf("Begin = %+v, want finalize target %q generation %d", b, want, wantGen)
			}
			ts, err := runs.TaskState(ctx, run, "0")
			if err != nil {
				t.Fatal(err)
			}
			if ts.Pending || ts.FinalizeTarget != want || (want != "" && ts.FinalizeGen != wantGen) {
				t.Errorf("TaskState = %+v, want finalize target %q generation %d", ts, want, wantGen)
			}
		}
	}
	for _, step := range []struct {
		name    string
		do      func()
		want    string
		wantGen int
	}{
		{"another graph pending", func() { complete("0") }, "", 0},
		{"every graph finished", func() { complete("1") }, "cpu", 0},
		{"queued for another generation", func() { mustOK(t, runs.FinalizeQueued(ctx, run, 1)) }, "cpu", 0},
		{"queued", func() { mustOK(t, runs.FinalizeQueued(ctx, run, 0)) }, "", 0},
		{"next generation", func() { mustOK(t, runs.NextFinalizeGen(ctx, run, 0)) }, "cpu", 1},
		{"queued again", func() { mustOK(t, runs.FinalizeQueued(ctx, run, 1)) }, "", 0},
		{"final", func() {
			mustOK(t, runs.NextFinalizeGen(ctx, run, 1))
			_, err := runs.Finish(ctx, run, runstate.RunDone, "", "")
			mustOK(t, err)
		}, "", 0},
	} {
		step.do()
		t.Run(step.name, asked(step.want, step.wantGen))
	}
}

// Recording a finalize as queued never creates the record of a run Redis
// does not know (one past its retention, or lost): a hash holding only
// the marker would read as a run.
func TestFinalizeQueuedLeavesAnUnknownRunUnknown(t *testing.T) {
	ctx := context.Background()
	runs := runstate.NewRuns(realRedis(t))
	run := fmt.Sprintf("fq-none-%d", time.Now().UnixNano())
	mustOK(t, runs.FinalizeQueued(ctx, run, 0))
	if known, _, err := runs.Known(ctx, run); err != nil || known {
		t.Fatalf("Known = %v, %v after FinalizeQueued of an unknown run, want false", known, err)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
