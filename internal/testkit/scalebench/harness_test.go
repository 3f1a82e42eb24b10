package scalebench

import (
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// fleet is one redis-server, one store and in-process workers serving a
// queue of their own: the pipeline as a fleet runs it, less the process
// boundaries (which cost the same at every N, so they do not change the
// per-task figures' shape).
type fleet struct {
	b      *testing.B
	Redis  *testsvc.RedisServer
	rdb    redis.UniversalClient
	Store  artifacts.Store
	S3     *countingProxy // nil with a file store
	Queue  string
	client *jobs.Client
	reg    backend.Registry
}

// newFleet starts Redis and a store: "file" (a local directory) or "s3"
// (a versitygw bucket, reached through a proxy that counts requests).
func newFleet(b *testing.B, storeKind string) *fleet {
	b.Helper()
	orttest.Need(b)
	f := &fleet{b: b, Redis: testsvc.OwnRedis(b, testsvc.RedisOptions{}), reg: backend.Registry{"ort": ort.New(ort.Options{})}}
	ctx := context.Background()
	var err error
	if f.rdb, err = runstate.ConnectRedis(ctx, f.Redis.URL); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.rdb.Close() })
	switch storeKind {
	case "file":
		f.Store, err = artifacts.NewLocal(b.TempDir())
	case "s3":
		srv := testsvc.OwnS3(b, testsvc.S3Options{})
		cfg := srv.Bucket(b)
		f.S3 = startCountingProxy(b, cfg.Endpoint)
		cfg.Endpoint = f.S3.URL
		f.Store, err = artifacts.NewS3(cfg)
	default:
		b.Fatalf("store %q", storeKind)
	}
	if err != nil {
		b.Fatal(err)
	}
	f.Queue = fmt.Sprintf("sb-%d", time.Now().UnixNano()%1e9)
	f.client = jobs.NewClient(f.rdb, f.Store)
	b.Cleanup(func() { f.client.Close() })
	return f
}

// workerOptions configures startWorkers.
type workerOptions struct {
	Workers, Concurrency int
	// Retention is set on WorkerConfig.Retention when the field exists
	// (the lead's Redis retention); retentionSet says whether it did.
	Retention time.Duration
}

// startWorkers starts in-process workers on the fleet's queue, shut down
// when the benchmark ends. It reports whether WorkerConfig has a Retention
// field it could set (reflection keeps this file building before and
// after that field lands, so the baseline is measured with the same code).
func (f *fleet) startWorkers(o workerOptions) (stop func(), retentionSet bool) {
	f.b.Helper()
	var ws []*jobs.Worker
	for range max(o.Workers, 1) {
		cfg := jobs.WorkerConfig{Redis: f.rdb, Store: f.Store, Backends: f.reg, Queues: []string{f.Queue},
			Concurrency: max(o.Concurrency, 1), WorkDir: f.b.TempDir(), Log: io.Discard}
		if o.Retention > 0 {
			if fv := reflect.ValueOf(&cfg).Elem().FieldByName("Retention"); fv.IsValid() && fv.Type() == reflect.TypeOf(time.Duration(0)) {
				fv.Set(reflect.ValueOf(o.Retention))
				retentionSet = true
			}
		}
		w, err := jobs.NewWorker(cfg)
		if err != nil {
			f.b.Fatal(err)
		}
		if err := w.Start(); err != nil {
			f.b.Fatal(err)
		}
		ws = append(ws, w)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, w := range ws {
				w.Shutdown()
			}
		})
	}
	f.b.Cleanup(stop)
	return stop, retentionSet
}

// tuning is how a benchmark's runs are tuned.
type tuning struct {
	Candidates string
	Strategy   string
	BenchTime  time.Duration
}

var tinyTuning = tuning{Candidates: "ort:cpu:basic", Strategy: strategy.FirstWins, BenchTime: 20 * time.Millisecond}

// submit submits a bundle (a new run, Force) and returns the run id and
// when submit began.
func (f *fleet) submit(bun *bundle.Bundle, tu tuning) (string, time.Time) {
	f.b.Helper()
	strat, err := strategy.Parse(tu.Strategy, 0)
	if err != nil {
		f.b.Fatal(err)
	}
	cands, err := backend.ParseCandidates(tu.Candidates)
	if err != nil {
		f.b.Fatal(err)
	}
	start := time.Now()
	sub, err := f.client.Submit(context.Background(), bun, jobs.SubmitOptions{Target: f.Queue, Strategy: strat,
		Candidates: cands, Backends: f.reg, BenchTime: tu.BenchTime, Force: true})
	if err != nil {
		f.b.Fatal(err)
	}
	return sub.Run, start
}

// wait waits for a run to be final and returns its record. It polls two
// fields of the run's hash, gently: reading the whole record (every
// graph's status) of a 2,000-graph run in a tight loop would take CPU from
// the workers being measured. The end of a run is its finished_at, so the
// poll interval adds nothing to the figures.
func (f *fleet) wait(run string, limit time.Duration) runstate.RunStatus {
	f.b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for {
		v, err := f.rdb.HMGet(ctx, "tunefleet:run:{"+run+"}", "status").Result()
		if err == nil && len(v) == 1 {
			if s, _ := v[0].(string); runstate.IsFinal(s) {
				st, err := f.client.Runs().Get(ctx, run)
				if err != nil {
					f.b.Fatal(err)
				}
				return st
			}
		}
		if time.Now().After(deadline) {
			st, _ := f.client.Runs().Get(ctx, run)
			f.b.Fatalf("run %s not final after %v: %s %d/%d done, %d failed", run, limit, st.Status, st.Done, st.Total, st.Failed)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// runOnce submits a bundle, waits for its run to end done, and returns the
// run and how long it took from submit to finalize's record of it.
func (f *fleet) runOnce(bun *bundle.Bundle, tu tuning, limit time.Duration) (runstate.RunStatus, time.Duration) {
	f.b.Helper()
	run, start := f.submit(bun, tu)
	st := f.wait(run, limit)
	if st.Status != runstate.RunDone {
		f.b.Fatalf("run %s ended %s: %s", run, st.Status, st.Reason)
	}
	return st, st.FinishedAt.Sub(start)
}

// fillIndex writes the result index entry of every work key of run (read
// from its run.json) as a copy of the indexed result of srcKey on
// platform: the graphs of a bundle made of one part repeated all compute
// the same, so one cold tuning stands for all of them, and a 2,000-graph
// index is filled in seconds instead of a 2,000-graph cold run.
func (f *fleet) fillIndex(run, platform, srcWorkKey string) int {
	f.b.Helper()
	ctx := context.Background()
	raw, err := artifacts.ReadObject(ctx, f.Store, artifacts.ResultIndexKey(platform, srcWorkKey), artifacts.MaxJSONSize)
	if err != nil {
		f.b.Fatal(err)
	}
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(ctx, f.Store, artifacts.RunKey(run), &spec); err != nil {
		f.b.Fatal(err)
	}
	n := 0
	for _, wk := range spec.WorkKeys {
		key := artifacts.ResultIndexKey(platform, wk)
		if _, err := f.Store.Stat(ctx, key); err == nil {
			continue
		}
		if err := f.Store.Put(ctx, key, strings.NewReader(string(raw)), int64(len(raw))); err != nil {
			f.b.Fatal(err)
		}
		n++
	}
	return n
}

// workKeys returns a run's work keys by graph.
func (f *fleet) workKeys(run string) map[string]string {
	f.b.Helper()
	var spec jobs.RunSpec
	if err := artifacts.GetJSON(context.Background(), f.Store, artifacts.RunKey(run), &spec); err != nil {
		f.b.Fatal(err)
	}
	return spec.WorkKeys
}

// envList reads a comma-separated list of ints from the environment.
func envInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
