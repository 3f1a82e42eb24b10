package web_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
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
}

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
	f.first = f.submit(t, b, "cpu", "ort:cpu:basic,ort:cpu:all")
	f.wait(t, f.first, runstate.RunDone)
	f.second = f.submit(t, b, "cpu", "ort:cpu:disabled")
	f.wait(t, f.second, runstate.RunDone)
	// A result.json the store holds broken (a disk fault, a hand edit):
	// its history entry was written from it when it was whole.
	broken := filepath.Join(f.root, filepath.FromSlash(artifacts.GraphResultKey(f.second, "1")))
	if err := os.WriteFile(broken, []byte(`{"format": "tunefleet.result/v1", "results": [{"candid`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.running = f.submit(t, b, idleQueue, "ort:cpu:basic")
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
	s, err := strategy.Parse(strategy.MaxThroughput, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := backend.ParseCandidates(cands)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.client.Submit(context.Background(), b, jobs.SubmitOptions{Target: target, Strategy: s, Candidates: cs,
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, BenchTime: 20 * time.Millisecond})
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
