package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/web"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// model is the fixture's model: two graph specs, an MLP and a conv net.
const model = "webtest.TwoGraphs"

// idleQueue is a target class no worker serves until the test says so: a
// run for it stays running, to be cancelled.
const idleQueue = "web-idle"

// fixture is a fleet with real runs in it: a real redis-server, a local
// store, and a worker tuning with real ONNX Runtime.
type fixture struct {
	rdb    redis.UniversalClient
	root   string // the store's directory
	store  artifacts.Store
	client *jobs.Client
	// first was tuned with two candidates; second (the newest) with one,
	// so every graph's winner changed, and its graph 1 result.json was
	// then broken in the store; running waits on idleQueue.
	first, second, running string
	// night1 and night2 are the nightlies that submitted first and
	// second: the candidates changed between them (settings changed), and
	// night2's graph 1 is recorded as failed in its history.
	night1, night2 string
}

// The fixture's nightlies.
const (
	night1 = "2026-12-01-0000000000aa"
	night2 = "2026-12-02-0000000000aa"
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	orttest.Need(t)
	url := testsvc.Redis(t)
	rdb, err := runstate.ConnectRedis(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{rdb: rdb, root: t.TempDir()}
	if f.store, err = artifacts.NewLocal(f.root); err != nil {
		t.Fatal(err)
	}
	f.client = jobs.NewClient(rdb, f.store)
	t.Cleanup(func() { f.client.Close() })
	f.startWorker(t, "cpu")
	b := twoGraphBundle(t)
	f.night1, f.night2 = night1, night2
	f.first = f.submitNightly(t, b, "cpu", "ort:cpu:basic,ort:cpu:all", night1)
	f.wait(t, f.first, runstate.RunDone)
	f.second = f.submitNightly(t, b, "cpu", "ort:cpu:disabled", night2)
	st := f.wait(t, f.second, runstate.RunDone)
	failGraph(t, f.store, st, "1")
	f.plan(t, night1, state.PlanEntry{Model: model, Target: "cpu", Run: f.first, Outcome: state.OutcomeSubmitted, Graphs: 2, Enqueued: 2})

	// A result.json the store holds broken (a disk fault, a hand edit):
	// its history entry was written from it when it was whole.
	broken := filepath.Join(f.root, filepath.FromSlash(artifacts.GraphResultKey(f.second, "1")))
	if err := os.WriteFile(broken, []byte(`{"format": "tunefleet.result/v1", "results": [{"candid`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.running = f.submitNightly(t, b, idleQueue, "ort:cpu:basic", night2)
	// In the plan's order: a run still going, the run whose graph failed,
	// an entry never submitted. The report reads failures first.
	f.plan(t, night2, state.PlanEntry{Model: model, Target: idleQueue, Run: f.running, Outcome: state.OutcomeSubmitted, Graphs: 2, Enqueued: 2},
		state.PlanEntry{Model: model, Target: "cpu", Run: f.second, Outcome: state.OutcomeSubmitted, Graphs: 2, Enqueued: 2},
		state.PlanEntry{Model: "webtest.Gone", Target: "cpu", Outcome: state.OutcomeFailed, Error: "bundle bundles/gone.tgz is not in the store"})
	return f
}

// serve starts the web UI's handler on loopback.
func (f *fixture) serve(t *testing.T, cfg web.Config) *httptest.Server {
	t.Helper()
	cfg.Redis, cfg.Store = f.rdb, f.store
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs
}

func (f *fixture) startWorker(t *testing.T, queue string) {
	t.Helper()
	w, err := jobs.NewWorker(jobs.WorkerConfig{Redis: f.rdb, Store: f.store, Backends: backend.Registry{"ort": ort.New(ort.Options{})},
		Queues: []string{queue}, Concurrency: 2, WorkDir: t.TempDir(), Name: "web-test-" + queue})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
}

func (f *fixture) submit(t *testing.T, b *bundle.Bundle, target, cands string) string {
	t.Helper()
	return f.submitNightly(t, b, target, cands, "")
}

func (f *fixture) submitNightly(t *testing.T, b *bundle.Bundle, target, cands, nightly string) string {
	t.Helper()
	s, err := strategy.Parse(strategy.MaxThroughput, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := backend.ParseCandidates(cands)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.client.Submit(context.Background(), b, jobs.SubmitOptions{Target: target, Strategy: s, Candidates: cs,
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, BenchTime: 20 * time.Millisecond, Nightly: nightly})
	if err != nil {
		t.Fatal(err)
	}
	return sub.Run
}

// wait polls until run is final and wants it to end as want.
func (f *fixture) wait(t *testing.T, run, want string) runstate.RunStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // generous: a loaded 2-core machine
	defer cancel()
	for {
		st, err := f.client.Runs().Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			if st.Status != want {
				t.Fatalf("run %s ended %s, want %s: %+v", run, st.Status, want, st)
			}
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s did not end: %+v", run, st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// twoGraphBundle makes a bundle of two graph specs with reference outputs
// from ONNX Runtime.
func twoGraphBundle(t *testing.T) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Open(orttest.Bundle(t, model,
		orttest.Part{Model: onnxtest.MLP(16, 32, 4), Shapes: []string{"input:1x16..8x16"}},
		orttest.Part{Model: onnxtest.ConvNet(), Shapes: []string{"image:1x3x16x16..4x3x16x16"}}))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plan writes a nightly's plan.json, as producer nightly does, and its
// morning report (summary.json, report.html without links).
func (f *fixture) plan(t *testing.T, id string, entries ...state.PlanEntry) {
	t.Helper()
	p := state.Plan{Format: state.PlanFormat, Nightly: id, FleetDigest: "sha256:" + strings.Repeat("5e", 32), CreatedAt: time.Now().UTC(), Entries: entries}
	if err := artifacts.PutJSON(context.Background(), f.store, state.PlanKey(id), p); err != nil {
		t.Fatal(err)
	}
	if _, err := report.Nightly(context.Background(), f.store, &p, report.Links{}); err != nil {
		t.Fatal(err)
	}
}

// failGraph rewrites a run's history entry on its platform as if graph
// had failed (its candidates no longer pass the check): what a night
// whose settings changed may record.
func failGraph(t *testing.T, store artifacts.Store, st runstate.RunStatus, graph string) {
	t.Helper()
	ctx := context.Background()
	e, _, err := history.Find(ctx, store, model, st.Platform, st.Run)
	if err != nil {
		t.Fatal(err)
	}
	e.Status = history.GraphFailed
	for i, g := range e.Graphs {
		if g.Name == graph {
			e.Graphs[i].Status, e.Graphs[i].Candidate, e.Graphs[i].Bench = history.GraphFailed, "", nil
			e.Graphs[i].Failure = &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "output 0 differs beyond its tolerance"}
		}
	}
	if err := artifacts.PutJSON(ctx, store, e.Key(), e); err != nil {
		t.Fatal(err)
	}
}

// tenRuns files ten history entries of another model, a day apart, made
// from a real entry of run: a history long enough that its date labels
// would overprint if they were not thinned.
func (f *fixture) tenRuns(t *testing.T, run string) string {
	t.Helper()
	ctx := context.Background()
	st, err := f.client.Runs().Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := history.Find(ctx, f.store, model, st.Platform, run)
	if err != nil {
		t.Fatal(err)
	}
	const ten = "webtest.TenRuns"
	base := time.Date(2026, 11, 20, 2, 0, 0, 0, time.UTC)
	for i := range 10 {
		c := *e
		c.Model, c.Run, c.Created, c.Nightly = ten, fmt.Sprintf("%s-%012d", ten, i), base.Add(time.Duration(i)*24*time.Hour), ""
		c.Graphs = slices.Clone(e.Graphs)
		for j := range c.Graphs {
			if b := c.Graphs[j].Bench; b != nil {
				nb := *b
				nb.Throughput *= 1 + 0.02*float64(i%3)
				c.Graphs[j].Bench = &nb
			}
		}
		if _, err := history.Append(ctx, f.store, &c); err != nil {
			t.Fatal(err)
		}
	}
	return ten
}
