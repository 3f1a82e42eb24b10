package faults_test

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
)

// threeGraphs is a bundle whose run lasts long enough (three graphs, two
// candidates each, one worker) for a fault to land between its graphs.
func threeGraphs(t *testing.T, model string) string {
	return stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8), onnxtest.ConvNet(), onnxtest.TwoInputs())
}

var slowCandidates = []string{"--candidates", "ort:cpu:basic,ort:cpu:extended", "--bench-time", "300ms"}

// redis-server killed and started again with its append-only file, between
// two graphs of a run: the run completes as if nothing had happened.
func TestRedisRestartWithPersistence(t *testing.T) {
	sc := begin(t, 4, "SIGKILL redis-server (appendonly, fsync always) after the first graph, start it again 2 s later")
	s := stack.New(t, stack.Options{PersistRedis: true})
	const model = "faults.RedisPersist"
	dir := threeGraphs(t, model)
	s.StartWorker(stack.WorkerOptions{})
	run, _ := s.Submit(dir, slowCandidates...)
	s.WaitDone(run, 1, 3*time.Minute)
	notFinal(t, s, run)
	s.Redis.Kill()
	time.Sleep(2 * time.Second)
	s.Redis.Start()
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if st.Done != 3 {
		t.Errorf("run %+v, want 3 graphs done", st)
	}
	wantStatusLine(t, sc, s, run, "done")
}

// redis-server restarted empty (no persistence) mid-run: `producer status`
// rebuilds the run from the store instead of saying "no such run", the
// same submission again brings the run to a final state, and the attempt
// results written before the loss are kept (new attempts get new numbers).
func TestRedisRestartWithoutPersistence(t *testing.T) {
	sc := begin(t, 5, "SIGKILL redis-server (nothing persisted) after the first graph, start it empty, submit the bundle again")
	s := stack.New(t, stack.Options{})
	const model = "faults.RedisLost"
	dir := threeGraphs(t, model)
	s.StartWorker(stack.WorkerOptions{})
	run, _ := s.Submit(dir, slowCandidates...)
	s.WaitDone(run, 1, 3*time.Minute)
	notFinal(t, s, run)
	s.Redis.Kill()
	before := attemptResults(t, s.Store(), run)
	s.Redis.Start()

	// The store has run.json: status must say so, never "no such run".
	st, r := s.Status(run)
	if r.Code != 0 || strings.Contains(r.Stderr, "no such run") {
		t.Fatalf("status after Redis lost the run: %v", r)
	}
	if st.Run != run {
		t.Errorf("status after Redis lost the run: %+v", st)
	}
	sc.assert("status never says no such run")
	_, again := s.Submit(dir, slowCandidates...)
	s.WaitFinal(run, leaseWait)
	if st, r := s.Status(run); r.Code != 0 || !st.Final() {
		t.Fatalf("status after the re-submission: %v", r)
	}
	final := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if final.Done != 3 {
		t.Errorf("run %+v, want 3 graphs done", final)
	}
	after := attemptResults(t, s.Store(), run)
	for k, sum := range before {
		if after[k] != sum {
			t.Errorf("%s was overwritten or removed after Redis lost the run", k)
		}
	}
	// New attempts after the loss are numbered past the old ones.
	maxBefore := map[string]int{}
	for k := range before {
		g, _, _ := strings.Cut(k, "/attempts/")
		maxBefore[g] = max(maxBefore[g], attemptNumber(k))
	}
	for k := range after {
		if _, old := before[k]; old {
			continue
		}
		if g, _, _ := strings.Cut(k, "/attempts/"); attemptNumber(k) <= maxBefore[g] {
			t.Errorf("new attempt result %s reuses a number at or below %d, written before Redis was lost", k, maxBefore[g])
		}
	}
	sc.assert("attempt results kept, numbers grow")
	wantLine(t, sc, "producer submit (again)", again.Stdout+again.Stderr, run)
}

// attemptResults maps every attempts/<n>/result.json of a run to the digest
// of its content.
func attemptResults(t *testing.T, store artifacts.Store, run string) map[string][32]byte {
	t.Helper()
	ctx := context.Background()
	keys, err := store.List(ctx, "runs/"+run+"/graphs/")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][32]byte{}
	for _, k := range keys {
		if !strings.Contains(k, "/attempts/") {
			continue
		}
		b, err := artifacts.ReadObject(ctx, store, k, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = sha256.Sum256(b)
	}
	return out
}

// attemptNumber is n in runs/R/graphs/G/attempts/<n>/result.json.
func attemptNumber(key string) int {
	_, rest, _ := strings.Cut(key, "/attempts/")
	n, _ := strconv.Atoi(strings.TrimSuffix(rest, "/result.json"))
	return n
}
