package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/testkit/hooktest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
)

// TestMain serves stack.Main's roles too: the planned-night benchmark's
// workers are `worker run` processes of this test binary.
func TestMain(m *testing.M) { tstack.Main(m, tstack.MainOptions{}) }

// classes are two class names served by the same CPU workers.
var classes = []string{"cpu", "cpu.b"}

// graphPart is one graph of a test bundle.
type graphPart struct {
	b     *onnxtest.Builder
	shape []string
	seed  uint64
}

// writeBundle writes a bundle of model made of parts into dir (replacing
// it), reference outputs from ONNX Runtime.
func writeBundle(t testing.TB, dir, model string, parts []graphPart) {
	t.Helper()
	tmp := t.TempDir()
	var srcs []string
	for i, p := range parts {
		onnx := filepath.Join(tmp, fmt.Sprintf("g%d.onnx", i))
		if err := p.b.Write(onnx); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(tmp, fmt.Sprintf("part%d", i))
		if _, err := bundlegen.FromONNX(context.Background(), onnx, out, bundlegen.ONNXOptions{
			Ranges: p.shape, Samples: 1, Seed: p.seed, IntHi: 9, Reference: ort.New(ort.Options{}), WorkDir: t.TempDir(), Model: model,
		}); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, out)
	}
	os.RemoveAll(dir)
	if _, err := bundlegen.Merge(srcs, dir, model); err != nil {
		t.Fatal(err)
	}
}

// ownRedis is a client of a redis-server of the test's own (closed at its end).
func ownRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

type nightlyStack struct {
	// classes the worker serves (default: both of classes)
	classes []string
	rdb     redis.UniversalClient
	store   artifacts.Store
	fleetF  string
	reg     backend.Registry
	// redisURL, storeURL and env (the store's credentials) reach the
	// services from worker processes (newPlanStack's only).
	redisURL, storeURL string
	env                []string
	// signer signs the runs of the nights submitWith submits (nil: none).
	signer *provenance.Signer
	// memo opens their bundle directories (nil: none, a one-shot
	// producer's nights).
	memo *bundle.Memo
}

// startWorker starts a CPU worker serving both classes; stop it with the
// returned func (also at the end of the test).
func (s *nightlyStack) startWorker(t testing.TB) func() {
	t.Helper()
	queues := s.classes
	if queues == nil {
		queues = classes
	}
	w, err := jobs.NewWorker(jobs.WorkerConfig{
		Redis: s.rdb, Store: s.store, Backends: s.reg, Queues: queues, Concurrency: 2, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(w.Shutdown) }
	t.Cleanup(stop)
	return stop
}

func (s *nightlyStack) submit(t testing.TB, date string) (*state.Plan, bool) {
	t.Helper()
	return s.submitWith(t, date, fleet.Options{})
}

// submitWith submits the night with o (its Date set from date).
func (s *nightlyStack) submitWith(t testing.TB, date string, o fleet.Options) (*state.Plan, bool) {
	t.Helper()
	f, err := fleet.Load(s.fleetF)
	if err != nil {
		t.Fatal(err)
	}
	d, err := fleet.ParseDate(date)
	if err != nil {
		t.Fatal(err)
	}
	o.Date = d
	c := jobs.NewClient(s.rdb, s.store)
	defer c.Close()
	c.SetSigner(s.signer)
	sub := &fleet.Submitter{Redis: s.rdb, Store: s.store, Client: c, Backends: s.reg, Bundles: s.memo}
	plan, existed, err := sub.Submit(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	return plan, existed
}

// queued is every task asynq holds on the classes' queues, in any state,
// and every task it ever processed there.
func queued(t *testing.T, rdb redis.UniversalClient) (held, processed int) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range classes {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			continue // a queue nothing was ever enqueued on
		}
		held += info.Size
		processed += info.ProcessedTotal
	}
	return held, processed
}

func outcomes(p *state.Plan) map[string]string {
	out := map[string]string{}
	for _, e := range p.Entries {
		out[e.Model+"@"+e.Target] = fmt.Sprintf("%s %d/%d/%d", e.Outcome, e.Graphs, e.Enqueued, e.Reused)
	}
	return out
}

// morning is the Reporter `producer nightly --wait` ends with: the
// morning report of the plan, its webhook claimed in Redis.
type morning struct {
	store artifacts.Store
	rdb   redis.UniversalClient
	url   string
	got   **report.Summary
}

func (m morning) Nightly(ctx context.Context, id string) error {
	s, _, err := report.Morning(ctx, m.store, id, m.url, report.NotifyOptions{Claim: report.RedisClaimer{RDB: m.rdb}})
	*m.got = s
	return err
}

// TestNightlyEndToEnd: 5 models x 2 classes on real redis-server and
// versitygw. Night 1 is cold; night 2, over the unchanged fleet and
// submitted by two replicas at once with no worker running, enqueues
// nothing, carries every entry forward (each names night 1's run, whose
// work it is) and its morning report says every entry is unchanged; night 3, with one graph of one model changed into a
// much heavier one, tunes that graph alone, and its morning report calls
// it a new version of the model (what changed: the bundle and graph 0's
// files), not a regression however much slower it is (issue 30), and
// sends the webhook announcing it exactly once, however often it runs.
func TestNightlyEndToEnd(t *testing.T) {
	t.Parallel()
	orttest.Need(t)
	rdb := ownRedis(t)
	store, err := artifacts.NewS3(testsvc.S3(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	models := []string{"m0", "m1", "m2", "m3", "m4"}
	twoGraphs := func(hidden int) []graphPart {
		return []graphPart{{onnxtest.MLP(16, hidden, 4), []string{"input:1x16..4x16"}, 1}, {onnxtest.ConvNet(), []string{"image:1x3x16x16..2x3x16x16"}, 1}}
	}
	writeBundle(t, filepath.Join(root, "bundles", "m0"), "m0", twoGraphs(32))
	for i, m := range models[1:] {
		writeBundle(t, filepath.Join(root, "bundles", m), m, []graphPart{{onnxtest.MLP(8+i, 16, 4), []string{fmt.Sprintf("input:1x%d..4x%d", 8+i, 8+i)}, 1}})
	}
	// 100 ms of measurement in 10 rounds: a round of 10 ms outlasts the
	// stalls of a machine loaded tenfold (CI's, with the race detector),
	// which swallowed whole rounds of 2 ms at 20 ms and left night 3's
	// twentyfold regression within noise.
	var fl strings.Builder
	fl.WriteString("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu, cpu.b]\n  candidates: [ort:cpu:basic]\n  bench_time: 100ms\nmodels:\n")
	for _, m := range models {
		fmt.Fprintf(&fl, "  - model: %s\n    bundle: bundles/%s\n", m, m)
	}
	s := &nightlyStack{rdb: rdb, store: store, fleetF: filepath.Join(root, "fleet.yaml"), reg: backend.Registry{"ort": ort.New(ort.Options{})}}
	if err := os.WriteFile(s.fleetF, []byte(fl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := runstate.NewRuns(rdb)
	stopWorker := s.startWorker(t)

	// Night 1: cold, every graph enqueued.
	night1, existed := s.submit(t, "2026-12-01")
	if existed || len(night1.Entries) != 10 || night1.Failed() != 0 {
		t.Fatalf("night 1: existed %v, plan %+v", existed, night1)
	}
	for k, o := range outcomes(night1) {
		want := "submitted 1/1/0"
		if strings.HasPrefix(k, "m0@") {
			want = "submitted 2/2/0"
		}
		if o != want {
			t.Errorf("night 1 %s: %s, want %s", k, o, want)
		}
	}
	if _, err := fleet.Wait(ctx, runs, night1, 50*time.Millisecond, fleet.NoReport{}); err != nil {
		t.Fatal(err)
	}
	// The same night again: its plan, nothing submitted.
	if again, existed := s.submit(t, "2026-12-01"); !existed || again.CreatedAt != night1.CreatedAt {
		t.Fatalf("night 1 submitted twice: existed %v", existed)
	}

	// Night 2: no worker at all, two replicas at once.
	stopWorker()
	heldBefore, processedBefore := queued(t, rdb)
	if heldBefore != 0 {
		t.Fatalf("%d task(s) left after night 1", heldBefore)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	plans := make([]*state.Plan, 2)
	var wg sync.WaitGroup
	for i := range plans {
		wg.Go(func() { plans[i], _ = s.submit(t, "2026-12-02") })
	}
	wg.Wait()
	held, processed := queued(t, rdb)
	for _, q := range classes {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListScheduledTasks} {
			tasks, _ := list(q)
			for _, ti := range tasks {
				t.Errorf("night 2 queued on %s: %s %s", q, ti.Type, ti.Payload)
			}
		}
	}
	if held != 0 || processed != processedBefore {
		t.Fatalf("night 2 queued %d task(s) and processed %d: want none", held, processed-processedBefore)
	}
	for _, p := range plans {
		for k, o := range outcomes(p) {
			if !strings.HasPrefix(o, "unchanged ") || strings.Contains(o, "/0/0") {
				t.Errorf("night 2 %s: %s, want unchanged with every graph reused", k, o)
			}
		}
	}
	var stored state.Plan
	if err := artifacts.GetJSON(ctx, store, state.PlanKey(plans[0].Nightly), &stored); err != nil || len(stored.Entries) != 10 {
		t.Fatalf("night 2 plan.json: %+v, %v", stored, err)
	}
	for _, night := range []string{night1.Nightly, stored.Nightly} {
		raw, err := artifacts.ReadObject(ctx, store, state.PlanKey(night), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.ValidateJSON(schemas.Plan, "", raw); err != nil {
			t.Errorf("plan.json of %s against schemas/plan.schema.json: %v", night, err)
		}
	}
	hook, bodies := hooktest.Receiver(t)
	var summary *report.Summary
	reporter := morning{store: store, rdb: rdb, url: hook, got: &summary}
	if _, err := fleet.Wait(ctx, runs, &stored, 50*time.Millisecond, reporter); err != nil {
		t.Fatal(err)
	}
	if tt := summary.Totals; tt.Entries != 10 || tt.Unchanged != 10 || tt.Done != 10 || tt.Regressions != 0 {
		t.Errorf("night 2 summary totals %+v: want 10 entries, every one done and unchanged, no regression", tt)
	}
	if b := bodies(); len(b) != 0 {
		t.Errorf("night 2 (no news) sent the webhook: %q", b)
	}
	night1Runs := map[string]string{}
	for _, e := range night1.Entries {
		night1Runs[e.Model+"@"+e.Target] = e.Run
	}
	for _, e := range stored.Entries {
		if !e.Carried || e.Run != night1Runs[e.Model+"@"+e.Target] {
			t.Errorf("night 2 %s on %s: run %s, carried %v: want night 1's run %s carried forward", e.Model, e.Target, e.Run, e.Carried, night1Runs[e.Model+"@"+e.Target])
		}
		st, err := runs.Get(ctx, e.Run)
		if err != nil || st.Status != runstate.RunDone || st.Finalizations != 1 {
			t.Fatalf("night 2 run %s of %s: %+v, %v", e.Run, e.Model, st, err)
		}
		if !strings.HasPrefix(e.BundleDigest, "sha256:") {
			t.Errorf("night 2 %s: bundle digest %q", e.Model, e.BundleDigest)
		}
		var latest state.Latest
		if err := artifacts.GetJSON(ctx, store, artifacts.LatestKey(e.Model, e.Target), &latest); err != nil || latest.Run != e.Run {
			t.Errorf("latest.json of %s on %s: %+v, %v: want it naming %s", e.Model, e.Target, latest, err, e.Run)
		}
		var ms state.State
		if err := artifacts.GetJSON(ctx, store, artifacts.StateKey(e.Run), &ms); err != nil || ms.Status != runstate.RunDone {
			t.Errorf("state.json of %s: %v", e.Run, err)
		}
	}

	// Night 3: graph 0 of m0 changed into an MLP 512 times wider, which is
	// an order of magnitude slower at every batch, beyond any noise of a
	// 100 ms measurement; a worker again.
	writeBundle(t, filepath.Join(root, "bundles", "m0"), "m0", twoGraphs(16384))
	s.startWorker(t)
	night3, _ := s.submit(t, "2026-12-03")
	for k, o := range outcomes(night3) {
		want := "unchanged 1/0/1"
		if strings.HasPrefix(k, "m0@") {
			want = "submitted 2/1/1"
		}
		if o != want {
			t.Errorf("night 3 %s: %s, want %s", k, o, want)
		}
	}
	final, err := fleet.Wait(ctx, runs, night3, 50*time.Millisecond, reporter)
	if err != nil {
		t.Fatal(err)
	}
	for run, st := range final {
		if st.Status != runstate.RunDone {
			t.Errorf("night 3 run %s: %s %s", run, st.Status, st.Reason)
		}
	}
	versions := map[string]bool{}
	for _, e := range summary.Entries {
		for _, c := range e.Changes {
			if c.Regression {
				t.Errorf("night 3 %s@%s: a regression %+v", e.Model, e.Target, c)
			}
			if c.Kind == history.ChangeNewVersion && c.Graph != "" {
				versions[e.Model+"@"+e.Target+" graph "+c.Graph+" was "+c.Was] = true
			}
		}
		if (e.Model == "m0") != (e.NewVersion != "") || e.Model == "m0" && !strings.Contains(e.NewVersion, "graph 0 (files ") {
			t.Errorf("night 3 %s@%s: new version %q, want m0's alone, naming graph 0's files", e.Model, e.Target, e.NewVersion)
		}
	}
	if want := []string{"m0@cpu graph 0 was slower", "m0@cpu.b graph 0 was slower"}; len(versions) != 2 || !versions[want[0]] || !versions[want[1]] {
		for _, e := range summary.Entries {
			t.Logf("night 3 %s@%s: run %s (previous %s), status %s, new version %q, changes %+v", e.Model, e.Target, e.Run, e.PreviousRun, e.Status, e.NewVersion, e.Changes)
			for _, g := range e.Graphs {
				if e.Model == "m0" {
					b, _ := json.Marshal(g)
					t.Logf("  graph %s", b)
				}
			}
		}
		t.Errorf("night 3 new versions %v, want %v", versions, want)
	}
	if tt := summary.Totals; tt.Regressions != 0 || tt.NewVersions != 2 {
		t.Errorf("night 3 totals %+v: want no regression, 2 new versions (m0 on each class)", tt)
	}
	// The report again (a retry, another replica): the webhook is not resent.
	if _, _, err := report.Morning(ctx, store, night3.Nightly, hook, report.NotifyOptions{Claim: report.RedisClaimer{RDB: rdb}}); err != nil {
		t.Fatal(err)
	}
	if b := bodies(); len(b) != 1 || !strings.Contains(b[0], "m0 on cpu: new version: bundle") || !strings.Contains(b[0], "0 regression(s)") {
		t.Errorf("night 3 webhook bodies %q: want one, announcing m0's new version, no regression", b)
	}
}
