package topology_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/runstate"
)

// A Redis Cluster: the pipeline, then CLUSTER FAILOVER (on the replicas)
// of the masters holding the slots of a run whose task is being tuned and
// of its queue.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := testsvc.OwnRedisCluster(t)
	suite(t, c.URL, func(t *testing.T, s *stack.Stack, run string) string {
		moved := c.Failover(t, "tunefleet:run:{"+run+"}")
		what := fmt.Sprintf("CLUSTER FAILOVER of the run's master %s to %s", moved.Master, moved.Replica)
		ctx := context.Background()
		if q, err := c.ShardOf(ctx, "asynq:{"+s.Queue+"}:pending"); err == nil && q.Master != moved.Replica {
			qm := c.Failover(t, "asynq:{"+s.Queue+"}:pending")
			what += fmt.Sprintf(", then of the queue's master %s to %s", qm.Master, qm.Replica)
		}
		return what
	})
}

// Sentinel: the pipeline, then the master SIGKILLed while a task is being
// tuned; the sentinels promote the replica.
func TestSentinel(t *testing.T) {
	t.Parallel()
	set := testsvc.OwnRedisSentinel(t)
	suite(t, set.URL, func(t *testing.T, s *stack.Stack, run string) string {
		// Replication is asynchronous: a write the master acknowledged
		// and had not sent yet dies with it. WAIT until the replica has
		// every write so far, so what is tested is the failover, not
		// that window.
		if _, err := set.Master.Do(context.Background(), "WAIT", "1", "5000"); err != nil {
			t.Fatal(err)
		}
		set.KillMaster(t)
		return fmt.Sprintf("SIGKILL of master %s; sentinels promoted %s", set.Master.Addr, set.Replica.Addr)
	})
}

// suite runs the pipeline against the Redis at redisURL through the real
// CLI, one scenario after another on one worker and one store; failover
// moves the master under a run whose only task is being tuned (its
// trtexec waits at a gate) and says what it did.
func suite(t *testing.T, redisURL string, failover func(t *testing.T, s *stack.Stack, run string) string) {
	start := time.Now()
	s := stack.New(t, stack.Options{RedisURL: redisURL, StoreDir: t.TempDir()})
	trtreplay.FixtureDir(t) // skips without the fixtures (fails under CI)
	trtB, samples := stack.TRTBundle(t, "topo.Failover")
	gate := filepath.Join(t.TempDir(), "gate")
	cfg := stack.WorkingTRT(t, trtB, samples)
	cfg.Build.Gate = gate
	cfgPath := filepath.Join(t.TempDir(), "trt.json")
	if err := trtreplay.WriteConfigFile(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	s.StartWorker(stack.WorkerOptions{TRT: cfgPath, Args: []string{"--trtexec", trtreplay.Executable(t), "--retention", "1h", "--concurrency", "2"}})
	ctx := context.Background()
	const model = "topo.Pipeline"
	var run string

	t.Run("submit-tune-finalize", func(t *testing.T) {
		dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8), onnxtest.ConvNet())
		var r stack.Result
		run, r = s.Submit(dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--wait")
		var so stack.SubmitOut
		if err := json.Unmarshal([]byte(r.Stdout), &so); err != nil || len(so.Runs) != 1 {
			t.Fatalf("submit --wait: %v (%v)", r, err)
		}
		if st := so.Runs[0]; st.Status != runstate.RunDone || st.Done != 2 || st.Finalizations != 1 {
			t.Fatalf("run %+v, want done, 2 graphs, finalized once", st)
		}
		// The same submission again enqueues nothing.
		if _, again := s.Submit(dir, "--candidates", "ort:cpu:basic,ort:cpu:extended"); !strings.Contains(again.Stdout, `"enqueued":0`) && !strings.Contains(again.Stdout, `"enqueued": 0`) {
			t.Errorf("re-submission: %v, want nothing enqueued", again)
		}
	})
	if run == "" {
		t.FailNow()
	}

	t.Run("status-runs-retention", func(t *testing.T) {
		st, r := s.Status(run)
		if r.Code != 0 || st.Status != runstate.RunDone || st.Finalizations != 1 {
			t.Fatalf("status: %+v, %v", st, r)
		}
		if r := s.Producer("runs", "--model", model, "-o", "json"); r.Code != 0 || !strings.Contains(r.Stdout, run) {
			t.Errorf("runs --model: %v", r)
		}
		if r := s.Producer("runs", "--status", "done", "-o", "json"); r.Code != 0 || !strings.Contains(r.Stdout, run) {
			t.Errorf("runs --status done: %v", r)
		}
		// Finish gave every key of the run the worker's --retention.
		ttl, err := s.Client().TTL(ctx, "tunefleet:run:{"+run+"}").Result()
		if err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("the run's record expires in %v (%v), want within --retention 1h", ttl, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// No worker serves this class: cancel finalizes the run itself.
		dir := stack.ModelBundle(t, "topo.Cancel", onnxtest.MLP(64, 16, 4))
		r := s.Producer("submit", dir, "--target", s.Queue+"-idle", "--allow-unserved", "-o", "json", "--candidates", "ort:cpu:basic")
		var so stack.SubmitOut
		if err := json.Unmarshal([]byte(r.Stdout), &so); r.Code != 0 || err != nil || len(so.Submissions) != 1 {
			t.Fatalf("submit: %v (%v)", r, err)
		}
		idle := so.Submissions[0].Run
		if r := s.Producer("cancel", idle); r.Code != 0 || !strings.Contains(r.Stdout, "cancelled") {
			t.Fatalf("cancel: %v", r)
		}
		if st, r := s.Status(idle); st.Status != runstate.RunCancelled || st.Finalizations != 1 {
			t.Fatalf("status after cancel: %+v, %v", st, r)
		}
	})

	t.Run("reconcile", func(t *testing.T) {
		if r := s.Producer("reconcile"); r.Code != 0 {
			t.Fatalf("reconcile: %v", r)
		}
		if r := s.Producer("reconcile", run); r.Code != 0 {
			t.Fatalf("reconcile %s: %v", run, r)
		}
	})

	t.Run("nightly-twice", func(t *testing.T) {
		dir := stack.ModelBundle(t, "topo.Nightly", onnxtest.TwoInputs())
		// A model whose every candidate gives a wrong answer: the night
		// has a failure, so its morning report sends the webhook, once,
		// under a claim in Redis.
		wrong := stack.ModelBundle(t, "topo.Wrong", onnxtest.MLP(64, 16, 8))
		out := filepath.Join(wrong, "graphs", "0", "graphs", "0", "samples", "0", "output_0.pb")
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0x40
		os.WriteFile(out, b, 0o644)
		fleet := filepath.Join(t.TempDir(), "fleet.yaml")
		os.WriteFile(fleet, []byte(fmt.Sprintf("format: tunefleet.fleet/v1\ndefaults:\n  targets: [%s]\n  candidates: [ort:cpu:basic]\n  strategy: first-wins\n  bench_time: 30ms\n"+
			"models:\n  - model: topo.Nightly\n    bundle: %s\n  - model: topo.Wrong\n    bundle: %s\n", s.Queue, dir, wrong)), 0o644)
		type entry struct {
			Model, Run, Outcome string
			Enqueued, Reused    int
		}
		type plan struct {
			Nightly string  `json:"nightly"`
			Entries []entry `json:"entries"`
		}
		night := func(date string) (plan, entry) {
			r := s.Producer("nightly", "--fleet", fleet, "--date", date, "--wait", "-o", "json")
			// -o json: stdout is the plan alone, one JSON document;
			// stderr (not a terminal here) holds only the error that
			// says a run failed, not the morning report's lines: a
			// script merging it reads JSON and one error line.
			var p plan
			if err := json.Unmarshal([]byte(r.Stdout), &p); r.Code != 1 || err != nil || len(p.Entries) != 2 {
				t.Fatalf("nightly --date %s: %v (%v), want the plan alone on stdout and exit 1 (a run failed)", date, r, err)
			}
			if !strings.HasPrefix(r.Stderr, "producer: ") || strings.Count(r.Stderr, "\n") != 1 || strings.Contains(r.Stderr, "webhook:") {
				t.Errorf("nightly --date %s --wait -o json: stderr off a terminal holds more than its error:\n%s", date, r.Stderr)
			}
			for _, e := range p.Entries {
				if e.Model == "topo.Nightly" {
					return p, e
				}
			}
			t.Fatalf("nightly --date %s: no entry of topo.Nightly in %+v", date, p)
			return p, entry{}
		}
		first, e1 := night("2026-12-01")
		if e1.Outcome != "submitted" || e1.Enqueued != 1 {
			t.Fatalf("first night %+v, want submitted, 1 task", e1)
		}
		_, e2 := night("2026-12-02")
		if e2.Outcome != "unchanged" || e2.Enqueued != 0 {
			t.Fatalf("second night %+v, want unchanged, nothing enqueued", e2)
		}
		for _, e := range []entry{e1, e2} {
			if st, r := s.Status(e.Run); st.Status != runstate.RunDone || st.Finalizations != 1 {
				t.Errorf("nightly run %s: %+v, %v", e.Run, st, r)
			}
		}
		// The morning report of the first night, twice: one POST.
		hook, posts := webhook(t)
		for i, want := range []string{"webhook: sent", "webhook: already_sent"} {
			if r := s.Producer("nightly", "report", first.Nightly, "--notify", hook); r.Code != 0 || !strings.Contains(r.Stdout, want) {
				t.Errorf("nightly report %s (%d): %v, want %q", first.Nightly, i+1, r, want)
			}
		}
		if n := posts(); n != 1 {
			t.Errorf("the webhook got %d POSTs, want 1", n)
		}
	})

	t.Run("history", func(t *testing.T) {
		r := s.Producer("history", model, "--platform", s.Queue, "-o", "json")
		if r.Code != 0 || !strings.Contains(r.Stdout, run) {
			t.Fatalf("history: %v", r)
		}
	})

	t.Run("serve", func(t *testing.T) {
		addr := freeAddr(t)
		s.StartProducer("serve", "--listen", addr)
		for _, page := range []struct{ path, want string }{{"/runs/" + run, run}, {"/", run}, {"/metrics", "tunefleet_"}} {
			var body string
			stack.Poll(t, time.Minute, "GET "+page.path, func() (bool, string) {
				resp, err := http.Get("http://" + addr + page.path)
				if err != nil {
					return false, err.Error()
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				return resp.StatusCode == http.StatusOK, resp.Status
			})
			if !strings.Contains(body, page.want) {
				t.Errorf("GET %s does not mention %q", page.path, page.want)
			}
		}
	})

	t.Run("failover-while-tuning", func(t *testing.T) {
		failRun, _ := s.Submit(trtB.Dir, "--candidates", "trt:fp16", "--strategy", "first-wins")
		// The build waits at the gate: the task is being tuned.
		stack.Poll(t, 2*time.Minute, "the trtexec stand-in at its gate", func() (bool, string) {
			_, err := os.Stat(gate + ".waiting")
			return err == nil, fmt.Sprint(err)
		})
		tuning := func() string {
			v, _ := s.Client().HGet(ctx, "tunefleet:run:{"+failRun+"}:tuning", "0").Result()
			return v
		}
		if tuning() != "1" {
			t.Fatalf("attempt 1 of graph 0 is not marked tuning (%q) while its build runs", tuning())
		}
		what := failover(t, s, failRun)
		t.Log(what)
		if st, _ := s.Runs().Get(ctx, failRun); st.Final() || tuning() != "1" {
			t.Fatalf("the run moved on before the build was let go (%+v): the test proves nothing", st)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		st := s.WaitFinal(failRun, 3*time.Minute)
		if st.Status != runstate.RunDone || st.Finalizations != 1 {
			t.Fatalf("after %s: run %+v, want done, finalized exactly once", what, st)
		}
		if g := st.Graphs["0"]; g.Attempts != 1 || g.Winner != "trt:fp16" {
			t.Errorf("graph 0 %+v, want won by its first attempt (the one tuning through the failover)", g)
		}
		if st, r := s.Status(failRun); r.Code != 0 || st.Status != runstate.RunDone {
			t.Errorf("status after the failover: %v", r)
		}
		// The pipeline goes on on the new master.
		dir := stack.ModelBundle(t, "topo.After", onnxtest.MLP(64, 8, 2))
		_, r := s.Submit(dir, "--candidates", "ort:cpu:basic", "--wait")
		var so stack.SubmitOut
		if err := json.Unmarshal([]byte(r.Stdout), &so); err != nil || len(so.Runs) != 1 || so.Runs[0].Status != runstate.RunDone || so.Runs[0].Finalizations != 1 {
			t.Errorf("a run after the failover: %v", r)
		}
	})

	t.Run("gc", func(t *testing.T) {
		r := s.Producer("gc", "--keep-runs", "1", "--older-than", "0", "--dry-run=false", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("gc: %v", r)
		}
		out := filepath.Join(t.TempDir(), "deploy")
		if r := s.Producer("fetch", model, "--platform", s.Queue, "--out", out); r.Code != 0 {
			t.Fatalf("fetch after gc: %v", r)
		}
	})
	t.Logf("suite on %s: %v", redisURL, time.Since(start).Round(time.Second))
}

// webhook is a receiver for the morning report's POST; posts counts them.
func webhook(t *testing.T) (url string, posts func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/hook", func() int { return int(n.Load()) }
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Sentinel with passwords of its own: the master's (requirepass) and the
// sentinels' (their requirepass), given as --redis carries them — the
// sentinels' in the user info, the master's as ?password= or
// $TUNEFLEET_REDIS_PASSWORD. A run goes through a worker and finalizes
// once; a wrong password of either kind is exit 2 naming where each one
// goes, not "is redis-server running?".
func TestSentinelWithPasswords(t *testing.T) {
	t.Parallel()
	set := testsvc.OwnRedisSentinelWith(t, testsvc.RedisSentinelOptions{Password: "master-pw", SentinelPassword: "sentinel-pw"})
	s := stack.New(t, stack.Options{RedisURL: set.URL, StoreDir: t.TempDir()})
	s.StartWorker(stack.WorkerOptions{})
	dir := stack.ModelBundle(t, "topo.Auth", onnxtest.MLP(64, 8, 4))
	run, r := s.Submit(dir, "--candidates", "ort:cpu:basic", "--wait")
	var so stack.SubmitOut
	if err := json.Unmarshal([]byte(r.Stdout), &so); err != nil || len(so.Runs) != 1 || so.Runs[0].Status != runstate.RunDone || so.Runs[0].Finalizations != 1 {
		t.Fatalf("submit --wait through Sentinel with passwords: %v (%v)", r, err)
	}
	// The master's password from the environment instead of the URL.
	noMasterPW := strings.Replace(set.URL, "&password=master-pw", "", 1)
	if st := stack.RunProducer(t, append(s.Env, "TUNEFLEET_REDIS_PASSWORD=master-pw"), "status", run, "--redis", noMasterPW, "--store", s.StoreURL, "-o", "json"); st.Code != 0 || !strings.Contains(st.Stdout, `"done"`) {
		t.Errorf("status with the master's password in $TUNEFLEET_REDIS_PASSWORD: %v", st)
	}
	for name, bad := range map[string]string{
		"the sentinels' password wrong": strings.Replace(set.URL, ":sentinel-pw@", ":nope@", 1),
		"the master's password wrong":   strings.Replace(set.URL, "password=master-pw", "password=nope", 1),
		"no master password":            noMasterPW,
	} {
		st := stack.RunProducer(t, s.Env, "status", run, "--redis", bad, "--store", s.StoreURL)
		if st.Code != 2 || !strings.Contains(st.Stderr, "refused the password") || !strings.Contains(st.Stderr, "user info") ||
			strings.Contains(st.Stderr, "nope") || strings.Contains(st.Stderr, "sentinel-pw") {
			t.Errorf("%s: %v; want exit 2 saying where each password goes, no password echoed", name, st)
		}
	}
}
