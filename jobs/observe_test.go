package jobs_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
)

// obsRecorder is a jobs.Observer that keeps what it hears.
type obsRecorder struct {
	mu       sync.Mutex
	started  map[string]int
	finished map[string]int // "queue outcome class"
	phases   map[string]int
	bytes    map[string]int64
	lookups  map[bool]int
	waits    map[string]int // by queue: waits heard, non-negative
	failedC  map[string]int // failed candidates by class
	busy     []int          // every busy count heard
	total    int
	kind     string
}

func newObsRecorder() *obsRecorder {
	return &obsRecorder{started: map[string]int{}, finished: map[string]int{}, phases: map[string]int{}, bytes: map[string]int64{}, lookups: map[bool]int{}, waits: map[string]int{}, failedC: map[string]int{}}
}

func (r *obsRecorder) TaskStarted(q string) { r.mu.Lock(); r.started[q]++; r.mu.Unlock() }
func (r *obsRecorder) TaskFinished(q string, o jobs.Outcome, class string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		r.finished["non-positive duration"]++
	}
	r.finished[q+" "+string(o)+" "+class]++
}
func (r *obsRecorder) PhaseDone(p string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d > 0 {
		r.phases[p]++
	}
}
func (r *obsRecorder) Slots(kind string, busy, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kind, r.total, r.busy = kind, total, append(r.busy, busy)
}
func (r *obsRecorder) HandedBack() {}
func (r *obsRecorder) Transferred(dir string, n int64) {
	r.mu.Lock()
	r.bytes[dir] += n
	r.mu.Unlock()
}
func (r *obsRecorder) ResultIndexLookup(hit bool) { r.mu.Lock(); r.lookups[hit]++; r.mu.Unlock() }
func (r *obsRecorder) QueueWait(q string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d >= 0 {
		r.waits[q]++
	}
}
func (r *obsRecorder) CandidateFailed(class string)     { r.mu.Lock(); r.failedC[class]++; r.mu.Unlock() }
func (r *obsRecorder) TaskPhase(string, string, string) {}

// A worker's Observer hears every task with its outcome and failure class,
// every phase, the bytes both ways, the index lookups and its slots; its
// Logger gets one info record per task start and end, with the run, graph,
// queue, winner or failure class and duration (issue 12).
func TestWorkerObserverAndTaskLogs(t *testing.T) {
	t.Parallel()
	dir := threeGraphBundle(t)
	perturb(t, dir) // graph 0 gives a wrong answer; 1 and 2 have winners
	env := startEmbedded(t)
	sub := submitUnserved(t, env, dir, "observed")
	rec := newObsRecorder()
	var logs testsvc.SyncBuffer
	env.startWorker(t, jobs.WorkerConfig{Queues: []string{"observed"}, Concurrency: 2, ReconcileEvery: -1,
		Observer: rec, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	wait(t, env.client.Runs(), sub.Run)
	// The run is final once its last graph is recorded, a moment before
	// that graph's task returns and is counted.
	for deadline := time.Now().Add(time.Minute); rec.finishedTasks() < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.started["observed"] != 3 || rec.finished["observed succeeded "] != 2 || rec.finished["observed failed wrong_answer"] != 1 || len(rec.finished) != 2 {
		t.Errorf("tasks started %v, finished %v; want 3 started, 2 succeeded and 1 failed as wrong_answer", rec.started, rec.finished)
	}
	for _, p := range jobs.Phases() {
		// Graph 0 is built and checked, not benchmarked; its logs are
		// uploaded. Every phase is heard for graphs 1 and 2 at least.
		if rec.phases[p] < 2 {
			t.Errorf("phase %s heard %d times with a duration; phases %v", p, rec.phases[p], rec.phases)
		}
	}
	if rec.bytes[jobs.DirectionDown] <= 0 || rec.bytes[jobs.DirectionUp] <= 0 {
		t.Errorf("bytes transferred %v, want both directions", rec.bytes)
	}
	if rec.waits["observed"] != 3 || len(rec.waits) != 1 {
		t.Errorf("queue waits heard %v, want one per task: 3 on observed", rec.waits)
	}
	if rec.lookups[false] != 3 || rec.lookups[true] != 0 {
		t.Errorf("result index lookups %v, want 3 misses", rec.lookups)
	}
	if rec.kind != "cpu" || rec.total != 2 || rec.busy[0] != 0 || rec.busy[len(rec.busy)-1] != 0 || !slices.Contains(rec.busy, 1) {
		t.Errorf("slots %s of %d heard busy %v, want 0 first and last, 1 between", rec.kind, rec.total, rec.busy)
	}

	started, finished := map[string]map[string]any{}, map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		// A graph with no winner (wrong_answer) is logged once, with its
		// class: not again as a WARN "failed (infrastructure)" (issue 18).
		if msg, _ := r["msg"].(string); r["level"] == "WARN" && strings.Contains(msg, "graph 0") {
			t.Errorf("graph 0's wrong answer logged again as a warning: %s", msg)
		}
		switch r["msg"] {
		case "task started":
			started[r["graph"].(string)] = r
		case "task finished":
			finished[r["graph"].(string)] = r
		}
	}
	for _, g := range []string{"0", "1", "2"} {
		s, f := started[g], finished[g]
		if s == nil || f == nil || s["level"] != "INFO" || f["level"] != "INFO" || s["run"] != sub.Run || f["queue"] != "observed" || f["attempt"] != 1.0 || f["duration"] == "" {
			t.Errorf("graph %s: start %v, end %v", g, s, f)
			continue
		}
		if want := map[string]string{"0": "failed"}[g]; want != "" {
			if f["outcome"] != "failed" || f["failure_class"] != "wrong_answer" || f["winner"] != nil {
				t.Errorf("graph %s end %v, want failed as wrong_answer", g, f)
			}
		} else if f["outcome"] != "succeeded" || f["winner"] != "ort:cpu:basic" || f["failure_class"] != nil {
			t.Errorf("graph %s end %v, want succeeded with its winner", g, f)
		}
	}
}

func (r *obsRecorder) finishedTasks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.finished {
		n += c
	}
	return n
}
