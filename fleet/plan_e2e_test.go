package fleet_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/nightplan"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
)

// TestNightlyPlansFromHistory: on real redis-server and versitygw, night
// 1 (cold, no history) guesses every graph from its bundle, says so in
// the plan, its estimate line and the morning report (no error
// percentage), and counts the registered worker's slots; night 2, every bundle re-recorded (new
// samples: new work keys, the same graphs) and one model new, estimates
// each graph with what it took on night 1, the new model's with the
// class's median, enqueues the class's graphs longest first, and simulates
// the finish on the assumed workers; its morning report has the expected
// and actual finish.
func TestNightlyPlansFromHistory(t *testing.T) {
	t.Parallel()
	s := newPlanStack(t)
	rdb, store := s.rdb, s.store
	type model struct {
		name  string
		parts func(seed uint64) []graphPart
		bench string
	}
	mlp := func(in int) func(uint64) []graphPart {
		return func(seed uint64) []graphPart {
			return []graphPart{{onnxtest.MLP(in, 16, 4), []string{fmt.Sprintf("input:1x%d..2x%d", in, in)}, seed}}
		}
	}
	models := []model{
		{"quick", mlp(8), "10ms"},
		{"twice", func(seed uint64) []graphPart {
			return []graphPart{{onnxtest.MLP(9, 16, 4), []string{"input:1x9..2x9"}, seed}, {onnxtest.ConvNet(), []string{"image:1x3x16x16..2x3x16x16"}, seed}}
		}, "40ms"},
		{"slow", func(seed uint64) []graphPart { return []graphPart{{onnxtest.Slow(256), nil, seed}} }, "300ms"},
	}
	writeFleet := func(ms []model, seed uint64) {
		var fms []fleetModel
		for _, m := range ms {
			fms = append(fms, fleetModel{m.name, m.bench, m.parts(seed)})
		}
		s.writeFleet(t, fms)
	}
	submit := func(date string, o fleet.Options) *state.Plan {
		t.Helper()
		var err error
		if o.Date, err = fleet.ParseDate(date); err != nil {
			t.Fatal(err)
		}
		return s.submitRegistered(t, o)
	}
	ctx := context.Background()
	runs := runstate.NewRuns(rdb)

	// Night 1: no history; the worker's 2 slots are registered.
	writeFleet(models, 1)
	stop := s.startWorker(t)
	night1 := submit("2026-12-01", fleet.Options{})
	est := night1.Estimate
	if est == nil || len(est.Classes) != 1 {
		t.Fatalf("night 1 estimate %+v", est)
	}
	// A first night has no history: each graph is guessed from its bundle
	// (one candidate, its batch sizes, its bench time), and the plan, its
	// one-line estimate and the morning report say it is a guess.
	c := est.Classes[0]
	if c.Class != "cpu" || c.Graphs != 4 || c.Workers != 2 || c.WorkersFrom != state.WorkersRegistered ||
		!c.Guess || !est.Guess || est.ExpectedFinish == nil {
		t.Errorf("night 1 class estimate %+v, finish %v, guess %v: want 4 guessed graphs on 2 registered slots", c, est.ExpectedFinish, est.Guess)
	}
	for _, e := range night1.Entries {
		for _, g := range e.Estimates {
			// One ort candidate: a build of about a second and at most three
			// batch sizes of a warm-up and a bench time (10 to 300 ms here):
			// seconds, not the five minutes of a TensorRT build.
			if g.Source != state.EstimateGuess || g.Seconds < 1 || g.Seconds > 5 {
				t.Errorf("night 1 %s graph %s: %.2fs from %s with no history, want a guess of 1-5 s", e.Model, g.Graph, g.Seconds, g.Source)
			}
		}
	}
	if line := fleet.EstimateLine(night1); !strings.Contains(line, "a guess: no history on cpu") {
		t.Errorf("night 1 estimate line %q does not call itself a guess", line)
	}
	if raw, err := artifacts.ReadObject(ctx, store, state.PlanKey(night1.Nightly), artifacts.MaxJSONSize); err != nil {
		t.Fatal(err)
	} else if _, err := schemas.ValidateJSON(schemas.Plan, "", raw); err != nil {
		t.Errorf("night 1 plan.json (a guess) against schemas/plan.schema.json: %v", err)
	}
	var summary1 *report.Summary
	if _, err := fleet.Wait(ctx, runs, night1, 50*time.Millisecond, morning{store: store, rdb: rdb, got: &summary1}); err != nil {
		t.Fatal(err)
	}
	if f := summary1.Finish; f == nil || !f.Guess || f.ErrorPercent != nil || f.Actual == nil ||
		!strings.HasPrefix(f.Line(), "finish: guessed ") || strings.Contains(f.Line(), "%") {
		t.Errorf("night 1 morning report finish %+v, line %q: want a guess, with no error percentage", f, f.Line())
	} else {
		t.Logf("night 1: %s", f.Line())
	}
	// What each graph took on night 1, from its history entry.
	took := map[string]float64{}
	for _, e := range night1.Entries {
		cur, _, err := history.Find(ctx, store, e.Model, "cpu", e.Run)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Settings == nil || !slices.Equal(cur.Settings.Candidates, []string{"ort:cpu:basic"}) {
			t.Errorf("history entry of %s: settings %+v", e.Model, cur.Settings)
		}
		for _, g := range cur.Graphs {
			took[e.Model+"/"+g.Name] = g.SpentSeconds
		}
	}

	// Night 2: re-recorded bundles and a new model; no worker live, two
	// assumed.
	stop()
	models = append(models, model{"fresh", mlp(10), "10ms"})
	writeFleet(models, 2)
	night2 := submit("2026-12-02", fleet.Options{Workers: map[string]int{"cpu": 2}})
	known := slices.Collect(func(yield func(float64) bool) {
		for _, v := range took {
			if !yield(v) {
				return
			}
		}
	})
	median := nightplan.Median(known)
	want := map[string]float64{}
	for k, v := range took {
		want[k] = v
	}
	want["fresh/0"] = median
	var total float64
	for _, e := range night2.Entries {
		if e.Outcome != state.OutcomeSubmitted || e.Enqueued != len(e.Estimates) {
			t.Errorf("night 2 %s: %s, %d enqueued, %d estimates", e.Model, e.Outcome, e.Enqueued, len(e.Estimates))
		}
		sum := 0.0
		for _, g := range e.Estimates {
			k := e.Model + "/" + g.Graph
			src := state.EstimateHistory
			if e.Model == "fresh" {
				src = state.EstimateDefault
			}
			if g.Seconds != want[k] || g.Source != src || g.Seconds <= 0 {
				t.Errorf("night 2 %s: %.4fs from %s, want %.4fs from %s", k, g.Seconds, g.Source, want[k], src)
			}
			sum += g.Seconds
		}
		if e.ExpectedSeconds != sum {
			t.Errorf("night 2 %s: expected %.4fs, its graphs add up to %.4fs", e.Model, e.ExpectedSeconds, sum)
		}
		total += sum
	}
	est = night2.Estimate
	c = est.Classes[0]
	if c.Graphs != 5 || c.Workers != 2 || c.WorkersFrom != state.WorkersAssumed || c.DefaultSeconds != median || est.ExpectedFinish == nil || est.Order != fleet.OrderPlanned ||
		c.Guess || est.Guess {
		t.Errorf("night 2 estimate %+v, class %+v", est, c)
	}
	if d := c.DeviceSeconds - total; d > 1e-9 || d < -1e-9 {
		t.Errorf("night 2 class device time %.4fs, graphs %.4fs", c.DeviceSeconds, total)
	}
	// The queue holds the graphs longest expected first.
	pending, err := asynq.NewInspectorFromRedisClient(rdb).ListPendingTasks("cpu")
	if err != nil {
		t.Fatal(err)
	}
	runModel := map[string]string{}
	for _, e := range night2.Entries {
		runModel[e.Run] = e.Model
	}
	var order []string
	var durations []float64
	for _, ti := range pending {
		var p jobs.GraphPayload
		if err := jsonUnmarshal(ti.Payload, &p); err != nil {
			t.Fatal(err)
		}
		k := runModel[p.Run] + "/" + p.Graph
		order = append(order, k)
		durations = append(durations, want[k])
	}
	if len(order) != 5 || !slices.IsSortedFunc(durations, func(a, b float64) int { return -cmpFloat(a, b) }) {
		t.Errorf("night 2 queue order %v (%v): want the 5 graphs longest expected first", order, durations)
	}
	if got, sim := c.MakespanSeconds, nightplan.Makespan(durations, 2); got != sim || got < c.LongestSeconds {
		t.Errorf("night 2 makespan %.4fs, list scheduling of the queue on 2 gives %.4fs", got, sim)
	}
	if f := est.ExpectedFinish.Sub(est.EnqueuedAt).Seconds(); f-c.MakespanSeconds > 1e-3 || c.MakespanSeconds-f > 1e-3 {
		t.Errorf("night 2 expected finish %v is %.3fs after the enqueue, the makespan %.3fs", est.ExpectedFinish, f, c.MakespanSeconds)
	}
	raw, err := artifacts.ReadObject(ctx, store, state.PlanKey(night2.Nightly), artifacts.MaxJSONSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.ValidateJSON(schemas.Plan, "", raw); err != nil {
		t.Errorf("night 2 plan.json against schemas/plan.schema.json: %v", err)
	}

	// The night runs; its morning report has both finishes.
	s.startWorker(t)
	var summary *report.Summary
	if _, err := fleet.Wait(ctx, runs, night2, 50*time.Millisecond, morning{store: store, rdb: rdb, got: &summary}); err != nil {
		t.Fatal(err)
	}
	f := summary.Finish
	if f == nil || f.Expected == nil || f.Actual == nil || f.ErrorPercent == nil || !f.Actual.After(f.EnqueuedAt) ||
		!strings.HasPrefix(f.Line(), "finish: expected ") {
		t.Fatalf("night 2 morning report finish %+v", f)
	}
	t.Logf("night 2: %s", f.Line())
}

// newPlanStack is the bed of the planning tests: their own redis-server,
// versitygw, ONNX Runtime, and a directory for the bundles and the fleet
// file, every model on cpu with ort:cpu:basic.
func newPlanStack(t testing.TB) *nightlyStack {
	t.Helper()
	orttest.Need(t)
	redisURL := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	cfg := testsvc.S3(t)
	store, err := artifacts.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &nightlyStack{classes: []string{"cpu"}, rdb: rdb, store: store, fleetF: filepath.Join(t.TempDir(), "fleet.yaml"),
		reg:      backend.Registry{"ort": ort.New(ort.Options{})},
		redisURL: redisURL, storeURL: fmt.Sprintf("s3://%s?endpoint=%s&region=%s", cfg.Bucket, cfg.Endpoint, cfg.Region),
		env: []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey}}
}

// startWorkerProcesses starts n `worker run` processes of one slot each
// on the class cpu, as a fleet runs them (the default --prefetch), and
// waits until Redis has their n slots registered; stop them with the
// returned func (SIGTERM: each unregisters its slot).
func (s *nightlyStack) startWorkerProcesses(t testing.TB, n int) func() {
	t.Helper()
	var ws []*tstack.Worker
	for range n {
		ws = append(ws, tstack.StartWorkerProcess(t, s.env, "--redis", s.redisURL, "--store", s.storeURL, "--queues", "cpu", "--concurrency", "1"))
	}
	tstack.Poll(t, 2*time.Minute, fmt.Sprintf("%d worker processes registered", n), func() (bool, string) {
		reg, err := fleet.RegisteredWorkers(context.Background(), s.rdb, []string{"cpu"}, time.Now())
		return err == nil && reg["cpu"] == n, fmt.Sprintf("%v %v", reg, err)
	})
	return func() {
		for _, w := range ws {
			if !w.Stop(time.Minute) {
				t.Errorf("worker pid %d did not exit on SIGTERM:\n%s", w.Cmd.Process.Pid, w.Log())
			}
		}
	}
}

// fleetModel is one model of a planning test's fleet: its bundle's parts
// and its bench_time.
type fleetModel struct {
	name, bench string
	parts       []graphPart
}

// writeFleet records each model's bundle beside the fleet file and the
// fleet file that lists them.
func (s *nightlyStack) writeFleet(t testing.TB, models []fleetModel) {
	t.Helper()
	root := filepath.Dir(s.fleetF)
	var fl strings.Builder
	fl.WriteString("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n")
	for _, m := range models {
		writeBundle(t, filepath.Join(root, m.name), m.name, m.parts)
		fmt.Fprintf(&fl, "  - model: %s\n    bundle: %s\n    bench_time: %s\n", m.name, m.name, m.bench)
	}
	if err := os.WriteFile(s.fleetF, []byte(fl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// submitRegistered submits the fleet file, counting the worker slots
// Redis has registered (what producer nightly does).
func (s *nightlyStack) submitRegistered(t testing.TB, o fleet.Options) *state.Plan {
	t.Helper()
	f, err := fleet.Load(s.fleetF)
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(s.rdb, s.store)
	defer c.Close()
	sub := &fleet.Submitter{Redis: s.rdb, Store: s.store, Client: c, Backends: s.reg,
		Workers: func(ctx context.Context, classes []string) (map[string]int, error) {
			return fleet.RegisteredWorkers(ctx, s.rdb, classes, time.Now())
		}}
	plan, _, err := sub.Submit(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func cmpFloat(a, b float64) int { return cmp.Compare(a, b) }
