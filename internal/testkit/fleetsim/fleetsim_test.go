package fleetsim

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend/replay"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// TestTinyNight runs the simulator at a tiny size (20 graphs: 4 models of
// 5, 3 workers) on one Redis and a file store, and on a Redis Cluster and
// S3, and checks what it claims: every run done and finalized into a real
// state.json, each graph's engine the replay engine file the worker
// uploaded through its normal path, and every row of the table produced.
// It asserts no time: the rows are figures, not limits.
func TestTinyNight(t *testing.T) {
	orttest.Need(t)
	for _, tc := range []struct {
		redis, store string
		classes      int
	}{
		{"single", "file", 1},
		{"cluster", "s3", 2},
	} {
		t.Run(tc.redis+"-"+tc.store, func(t *testing.T) {
			res := Run(t, Config{Models: 4, GraphsPerModel: 5, Procs: 3, Slots: 1, Redis: tc.redis, Store: tc.store, Classes: tc.classes,
				Replay: "median=20s,sigma=0.5,scale=200,seed=1", Log: testWriter{t}, Tally: tc.redis == "single"})
			t.Log("\n" + res.Table())
			if res.Runs != 4 || res.States != 4 || res.DoneGraphs != 20 {
				t.Errorf("%d runs, %d state.json, %d graphs done; want 4, 4, 20", res.Runs, res.States, res.DoneGraphs)
			}
			want := []string{"coordinator CPU per graph", "Redis commands per graph", "Redis memory per graph",
				"enqueue → start, slot free (p50/p99)", "finalize throughput", "nightly plan + submit per graph", "nightly plan + submit per graph, the next night unchanged",
				"UI: nightly page", "`producer runs --limit 20`", "makespan ÷ lower bound"}
			if tc.store == "s3" {
				want = append(want, "store requests per graph")
			}
			for _, name := range want {
				row, ok := res.Row(name)
				if !ok || row.Measured == "" || row.Met == "" {
					t.Errorf("row %q: %+v, present %v", name, row, ok)
				}
			}
			if row, _ := res.Row("Redis commands per graph"); row.Value <= 0 {
				t.Errorf("Redis commands per graph %v: the night sent Redis nothing?", row.Value)
			}
			if tc.redis == "single" {
				// The tally names each sender, and counts what Redis did.
				for _, sender := range []string{"tunefleet-worker", "tunefleet-worker/asynq", "tunefleet-producer"} {
					if res.BySender.Of(sender).Total() == 0 {
						t.Errorf("no command of %s in the tally: %v", sender, res.BySender)
					}
				}
				if n := res.BySender.Of("fleetsim").Total(); n != 0 {
					t.Errorf("the simulator's own %d commands are in the tally", n)
				}
			}
			checkReplayEngines(t, res)
		})
	}
}

// TestQueueNamesSpreadOverMasters: on a Cluster of three masters, three
// classes' queues are three slots on three masters, and a fourth shares
// one (the Cluster scaling rows rest on it).
func TestQueueNamesSpreadOverMasters(t *testing.T) {
	cl := testsvc.OwnRedisCluster(t)
	svc := &services{}
	for _, n := range cl.Nodes {
		svc.nodes = append(svc.nodes, n.Addr)
	}
	shards, err := cl.Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		svc.masters = append(svc.masters, sh.Master)
	}
	names := queueNames(t, svc, "gpu.x", 4)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: svc.nodes})
	defer rdb.Close()
	masters := map[string]int{}
	for _, name := range names {
		// The master that holds the queue's pending list, as asynq names it.
		m, err := rdb.MasterForKey(context.Background(), "asynq:{"+name+"}:pending")
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr]++
	}
	if len(names) != 4 || len(masters) != 3 {
		t.Errorf("queues %v on masters %v: want 4 queues over all 3 masters", names, masters)
	}
}

// checkReplayEngines reads one run's state.json and each of its graphs'
// result.json: every graph has a winner whose engine is a replay engine
// file in the store, under its digest.
func checkReplayEngines(t *testing.T, res Result) {
	t.Helper()
	ctx := context.Background()
	run := res.RunIDs[0]
	raw, err := artifacts.ReadObject(ctx, res.Store, artifacts.StateKey(run), artifacts.MaxJSONSize)
	if err != nil {
		t.Fatal(err)
	}
	var st state.State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("state.json of %s: %v", run, err)
	}
	if len(st.Graphs) != 5 {
		t.Fatalf("state.json of %s has %d graphs, want 5", run, len(st.Graphs))
	}
	for _, g := range st.Graphs {
		raw, err := artifacts.ReadObject(ctx, res.Store, artifacts.GraphResultKey(run, g.Name), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		var r tuner.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Winner == nil || r.Winner.Engine == nil {
			t.Fatalf("graph %s of %s: no winning engine: %s", g.Name, run, raw)
		}
		eng, err := artifacts.ReadObject(ctx, res.Store, artifacts.BlobKey(r.Winner.Engine.SHA256), 1<<20)
		if err != nil {
			t.Fatalf("graph %s's engine: %v", g.Name, err)
		}
		var rec struct {
			Format, Model, Graph string
		}
		if err := json.Unmarshal(eng, &rec); err != nil || rec.Format != replay.EngineFormat || rec.Graph != g.Name {
			t.Errorf("graph %s's engine is not its replay record: %s (%v)", g.Name, eng, err)
		}
	}
}

// testWriter sends progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
