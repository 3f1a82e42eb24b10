package runstate

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// A pending graph shows one state, made of its record, its worker's
// progress and asynq's task, so that no two of them contradict: asynq's
// "active" alone is not "running" (a worker may hold the task ahead of a
// slot), and a progress whose task asynq no longer has active is stale.
func TestDeriveState(t *testing.T) {
	t.Parallel()
	running := &Progress{Worker: "w1", Attempt: 1, Phase: PhaseBuild}
	tests := []struct {
		name  string
		g     GraphStatus
		want  string
		stale bool // the progress is dropped
	}{
		{"done", GraphStatus{Status: GraphDone}, GraphDone, false},
		{"failed, with a stale progress", GraphStatus{Status: GraphFailed, Progress: running}, GraphFailed, false},
		{"queued, no task asked", GraphStatus{Status: GraphPending}, StateQueued, false},
		{"queued", GraphStatus{Status: GraphPending, Task: &TaskInfo{State: "pending"}}, StateQueued, false},
		{"active, nothing reported yet", GraphStatus{Status: GraphPending, Task: &TaskInfo{State: "active"}}, StateStarting, false},
		{"building", GraphStatus{Status: GraphPending, Progress: running, Task: &TaskInfo{State: "active"}}, StateRunning, false},
		{"building, task not asked", GraphStatus{Status: GraphPending, Progress: running}, StateRunning, false},
		{"waiting for a slot", GraphStatus{Status: GraphPending, Progress: &Progress{Phase: PhaseWaiting}, Task: &TaskInfo{State: "active"}}, StatePrefetched, false},
		{"downloading ahead of a slot", GraphStatus{Status: GraphPending, Progress: &Progress{Phase: PhaseDownload, Prefetched: true}, Task: &TaskInfo{State: "active"}}, StatePrefetched, false},
		{"downloading with a slot free", GraphStatus{Status: GraphPending, Progress: &Progress{Phase: PhaseDownload}, Task: &TaskInfo{State: "active"}}, StateRunning, false},
		{"retrying, its worker died", GraphStatus{Status: GraphPending, Progress: running, Task: &TaskInfo{State: "retry"}}, StateRetrying, true},
		{"scheduled", GraphStatus{Status: GraphPending, Task: &TaskInfo{State: "scheduled"}}, StateScheduled, false},
		{"archived", GraphStatus{Status: GraphPending, Task: &TaskInfo{State: "archived"}}, StateArchived, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.g
			g.derive()
			if g.State != tt.want || (g.Progress == nil) != (tt.stale || tt.g.Progress == nil) {
				t.Errorf("state %q, progress %+v: want %q (progress dropped: %v)", g.State, g.Progress, tt.want, tt.stale)
			}
		})
	}
	g := GraphStatus{Status: GraphPending, Progress: &Progress{Worker: "w2", Phase: PhaseWaiting}}
	g.derive()
	if s := g.StateText(); s != "waiting (prefetched by worker w2)" {
		t.Errorf("a prefetched graph reads %q", s)
	}
}

// A worker's progress is one hash field per graph: read with the run,
// dropped by the attempt that wrote it (not by an older one), dropped when
// the graph completes, and expired with the run.
func TestProgressRecordAndClear(t *testing.T) {
	ctx := context.Background()
	opts, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	runs := NewRuns(rdb)
	const run = "progress-run"
	if _, err := runs.Create(ctx, run, "m", "cpu", []string{"0", "1"}); err != nil {
		t.Fatal(err)
	}
	began := time.Now().Add(-3 * time.Second).UTC().Round(0)
	set := func(graph string, attempt int, phase string) {
		t.Helper()
		p := Progress{Worker: "w1", Attempt: attempt, Phase: phase, Candidate: "ort:cpu:all", Index: 1, Count: 2, PhaseSince: began.Add(time.Second), AttemptSince: began}
		if err := runs.SetProgress(ctx, run, graph, p); err != nil {
			t.Fatal(err)
		}
	}
	get := func() RunStatus {
		t.Helper()
		st, err := runs.Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	set("0", 2, PhaseBenchmark)
	st := get()
	p := st.Graphs["0"].Progress
	if p == nil || p.Phase != PhaseBenchmark || p.Candidate != "ort:cpu:all" || !p.AttemptSince.Equal(began) || st.Graphs["0"].State != StateRunning ||
		st.Graphs["1"].Progress != nil || st.Graphs["1"].State != StateQueued {
		t.Fatalf("after a progress of graph 0: %+v", st.Graphs)
	}
	if d := p.InAttempt(began.Add(5 * time.Second)); d != 5*time.Second {
		t.Errorf("in attempt %s, want 5s", d)
	}
	if txt := p.Text(began.Add(5 * time.Second)); txt != "benchmark ort:cpu:all (1/2) on worker w1, 4.0s in benchmark, 5.0s in attempt 2" {
		t.Errorf("text %q", txt)
	}
	// An older attempt ending does not drop the newer one's record.
	if err := runs.ClearProgress(ctx, run, "0", 1); err != nil {
		t.Fatal(err)
	}
	if get().Graphs["0"].Progress == nil {
		t.Error("attempt 1 cleared attempt 2's progress")
	}
	if err := runs.ClearProgress(ctx, run, "0", 2); err != nil {
		t.Fatal(err)
	}
	if get().Graphs["0"].Progress != nil {
		t.Error("attempt 2's progress outlived its end")
	}
	// Completing a graph drops its progress; finishing the run expires
	// the rest with the run's other keys.
	set("0", 3, PhaseUpload)
	set("1", 1, PhaseBuild)
	if _, _, err := runs.CompleteGraph(ctx, run, "0", GraphStatus{Status: GraphDone, Winner: "ort:cpu:all"}); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.HExists(ctx, progressKey(run), "0").Result(); err != nil || n {
		t.Errorf("graph 0's progress after it completed: %v, %v", n, err)
	}
	if st := get(); st.Graphs["0"].State != GraphDone || st.Graphs["0"].Progress != nil {
		t.Errorf("graph 0 after it completed: %+v", st.Graphs["0"])
	}
	// An attempt that says no progress can be there is not looked for
	// (one command less); a record left anyway is not shown for a graph
	// that is no longer pending.
	if _, _, err := runs.CompleteGraphProgress(ctx, run, "1", GraphStatus{Status: GraphDone, Winner: "ort:cpu:all"}, false); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.HExists(ctx, progressKey(run), "1").Result(); err != nil || !n {
		t.Errorf("graph 1's progress after a completion that did not look for it: %v, %v: want it left", n, err)
	}
	if st := get(); st.Graphs["1"].State != GraphDone || st.Graphs["1"].Progress != nil {
		t.Errorf("graph 1 after it completed: %+v", st.Graphs["1"])
	}
	if _, err := runs.Finish(ctx, run, RunCancelled, "", ""); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.TTL(ctx, progressKey(run)).Result(); err != nil || ttl <= 0 {
		t.Errorf("the progress key's TTL after the run ended: %v, %v: want it to expire with the run", ttl, err)
	}
}
