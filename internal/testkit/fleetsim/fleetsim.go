package fleetsim

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend/replay"
	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/testkit/redistally"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/internal/testkit/verdict"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// Candidate is the one candidate every simulated graph is tuned with: an
// ONNX Runtime candidate the producer validates as it would for real, and
// the worker's replay backend builds instead.
const Candidate = "ort:cpu:basic"

// Config is one simulated night.
type Config struct {
	// Models × GraphsPerModel graphs, over Procs worker processes of
	// Slots task slots each.
	Models, GraphsPerModel int
	Procs, Slots           int
	// Redis is "single" (one redis-server) or "cluster" (three masters,
	// one replica each); Store is "file" (a local directory) or "s3"
	// (versitygw, behind a proxy that counts requests).
	Redis, Store string
	// Classes is how many target classes (queues) the night's models
	// are spread over, round-robin (0: one). On a Cluster their names are
	// chosen so that each class's hash tag lands on another master while
	// masters last (Cluster scaling: a class's queue is one slot).
	Classes int
	// Replay is the workers' TUNEFLEET_REPLAY spec.
	Replay string
	// BenchTime and Warmup are the fleet file's: each graph's measurement
	// of the replay engine (real sleeps, not compressed).
	BenchTime, Warmup time.Duration
	// Stall fails the night when no run ends for this long (not a time
	// limit on the night: a night that moves may take as long as it takes).
	Stall time.Duration
	// Log hears progress lines (nil: none).
	Log io.Writer
	// Tally counts the night's Redis commands by sender and command from
	// redis-server's MONITOR feed (redistally; one Redis only): the
	// workers' (tunefleet-worker, their asynq servers'
	// tunefleet-worker/asynq) and the nightly's (tunefleet-producer).
	// MONITOR costs Redis a copy of every command: the Redis CPU of
	// such a night is not the coordinator's alone.
	Tally bool
}

// Graphs is the night's size.
func (c Config) Graphs() int { return c.Models * c.GraphsPerModel }

// Workers is the night's task slots.
func (c Config) Workers() int { return c.Procs * c.Slots }

// Describe is the night's one-line description.
func (c Config) Describe() string {
	cfg, _ := replay.Parse(c.Replay)
	classes := ""
	if c.Classes > 1 {
		classes = fmt.Sprintf(", %d classes", c.Classes)
	}
	return fmt.Sprintf("%s graphs (%d models × %d%s), %d workers (%d processes × %d slots), %s Redis, %s store, durations ÷ %g (%s)",
		thousands(c.Graphs()), c.Models, c.GraphsPerModel, classes, c.Workers(), c.Procs, c.Slots, c.Redis, c.Store, cfg.Scale, c.Replay)
}

// Row is one line of a night's table.
type Row struct {
	Name, Measured, Target, Met string
	// Value is the figure Compare sets beside another night's (per
	// graph, a time, a ratio).
	Value float64
	// Wall says the figure is a wall-clock one, which a loaded machine
	// stretches (CPU and counts are not).
	Wall bool
	// Shows is how much the row's view shows (the night's graphs for its
	// page, a run's graphs for the run page, the models for the fleet
	// page): such a figure may grow with it, linearly and no more (Compare).
	// 0: the figure should not grow with the night (per graph, or a view
	// of a fixed size: a page of runs, a model's runs).
	Shows float64
}

// Result is what one night measured.
type Result struct {
	Config Config
	Rows   []Row
	// Runs and States: the runs the nightly submitted, and how many have
	// state.json in the store (each finalized into a real module state).
	Runs, States, DoneGraphs int
	// Load is the one-minute load average when the night began and ended.
	LoadBefore, LoadAfter float64
	// BySender is the night's Redis commands by sender and command
	// (Config.Tally), the simulator's own left out.
	BySender redistally.Counts
	Nightly  string
	// RunIDs are the night's runs; Store is the store they are in, open
	// until the test ends.
	RunIDs []string
	Store  artifacts.Store
}

// Row returns the row named name.
func (r Result) Row(name string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Name == name {
			return row, true
		}
	}
	return Row{}, false
}

// services are the night's Redis and store.
type services struct {
	redisURL       string
	tally          *redistally.Tally // Config.Tally
	masters, nodes []string
	storeURL       string
	store          artifacts.Store
	s3PID          int
	proxy          *countingProxy
	env            []string
}

func startServices(tb testing.TB, c Config) *services {
	tb.Helper()
	s := &services{}
	ctx := context.Background()
	switch c.Redis {
	case "single":
		r := testsvc.OwnRedis(tb, testsvc.RedisOptions{})
		s.redisURL, s.masters, s.nodes = r.URL, []string{r.Addr}, []string{r.Addr}
		if c.Tally {
			// Before any client connects: the tally names connections
			// by what they say as they open.
			s.tally = redistally.Start(tb, r.Addr)
		}
	case "cluster":
		cl := testsvc.OwnRedisCluster(tb)
		s.redisURL = cl.URL
		shards, err := cl.Shards(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		for _, sh := range shards {
			s.masters = append(s.masters, sh.Master)
		}
		slices.Sort(s.masters)
		for _, n := range cl.Nodes {
			s.nodes = append(s.nodes, n.Addr)
		}
	default:
		tb.Fatalf("fleetsim: Redis %q (single or cluster)", c.Redis)
	}
	if c.Tally && s.tally == nil {
		tb.Fatalf("fleetsim: a tally of commands by sender needs one Redis (single), not %s", c.Redis)
	}
	switch c.Store {
	case "file":
		dir := tb.TempDir()
		s.storeURL = "file://" + dir
		st, err := artifacts.NewLocal(dir)
		if err != nil {
			tb.Fatal(err)
		}
		s.store = st
	case "s3":
		srv := testsvc.OwnS3(tb, testsvc.S3Options{})
		s.s3PID = srv.PID()
		cfg := srv.Bucket(tb)
		st, err := artifacts.NewS3(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		s.store = st
		s.proxy = startCountingProxy(tb, cfg.Endpoint)
		s.storeURL = fmt.Sprintf("s3://%s?endpoint=%s&region=%s", cfg.Bucket, s.proxy.URL, cfg.Region)
		// Credentials travel in the environment, never in a command line.
		s.env = []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey}
	default:
		tb.Fatalf("fleetsim: store %q (file or s3)", c.Store)
	}
	return s
}

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "fleetsim: "+format+"\n", args...)
	}
}

// Run simulates one night: real services, the real producer's nightly as
// a process, Procs real `worker run` processes with the replay backend;
// then it reads back what the night left and measures the operator's
// views over it.
func Run(tb testing.TB, c Config) Result {
	tb.Helper()
	if c.Stall == 0 {
		c.Stall = 5 * time.Minute
	}
	if c.BenchTime == 0 {
		c.BenchTime = 10 * time.Millisecond
	}
	if c.Warmup == 0 {
		c.Warmup = 2 * time.Millisecond
	}
	rc, err := replay.Parse(c.Replay)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	svc := startServices(tb, c)
	queues := queueNames(tb, svc, fmt.Sprintf("sim-%d", time.Now().UnixNano()%1e9), max(c.Classes, 1))
	genStart := time.Now()
	fleetPath := writeFleet(tb, tb.TempDir(), c.Models, c.GraphsPerModel, fleetSettings{Queues: queues, Candidates: []string{Candidate}, BenchTime: c.BenchTime, Warmup: c.Warmup})
	c.logf("%s: fleet written in %v", c.Describe(), time.Since(genStart).Round(time.Millisecond))

	// The workers: real `worker run` processes, each with Slots slots.
	wenv := append(slices.Clone(svc.env), replay.Env+"="+c.Replay)
	workers := make([]*stack.Worker, c.Procs)
	for i := range workers {
		workers[i] = stack.StartWorkerProcess(tb, wenv, "--redis", svc.redisURL, "--store", svc.storeURL, "--queues", strings.Join(queues, ","),
			"--concurrency", strconv.Itoa(c.Slots), "--work-dir", tb.TempDir())
	}
	stack.Poll(tb, c.Stall, "every worker process up", func() (bool, string) {
		up := 0
		for _, w := range workers {
			if w.Exited() {
				tb.Fatalf("a worker exited as it started:\n%s", w.Log())
			}
			if strings.Contains(w.Log(), "serving queues") {
				up++
			}
		}
		return up == len(workers), fmt.Sprintf("%d of %d up", up, len(workers))
	})
	c.logf("%d worker processes up", c.Procs)

	res := Result{Config: c, LoadBefore: verdict.LoadAverage()}
	before, err := readRedis(ctx, svc.masters, svc.nodes)
	if err != nil {
		tb.Fatal(err)
	}
	if svc.tally != nil {
		if _, _, err := svc.tally.Cut(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	s3Before := procCPU(svc.s3PID)
	var reqBefore int64
	if svc.proxy != nil {
		reqBefore = svc.proxy.n.Load()
	}
	workerCPUBefore := time.Duration(0)
	for _, w := range workers {
		workerCPUBefore += procCPU(w.Cmd.Process.Pid)
	}

	// The night: `producer nightly` plans and submits, and returns.
	nightStart := time.Now()
	nr := stack.RunProducer(tb, svc.env, "nightly", "--fleet", fleetPath, "--redis", svc.redisURL, "--store", svc.storeURL, "-o", "json", "-q")
	if nr.Code != 0 {
		tb.Fatalf("producer nightly: %s", nr)
	}
	var plan state.Plan
	if err := json.Unmarshal([]byte(nr.Stdout), &plan); err != nil {
		tb.Fatalf("producer nightly -o json: %v\n%s", err, nr.Stdout)
	}
	res.Nightly = plan.Nightly
	var runs []string
	for _, e := range plan.Entries {
		if e.Run == "" || e.Outcome == "failed" {
			tb.Fatalf("nightly entry %s: %s %s", e.Model, e.Outcome, e.Error)
		}
		runs = append(runs, e.Run)
	}
	res.Runs, res.RunIDs, res.Store = len(runs), runs, svc.store
	c.logf("nightly %s: %d runs submitted in %v (%v of CPU)", plan.Nightly, len(runs), nr.Wall.Round(time.Millisecond), nr.CPU.Round(time.Millisecond))

	rdb, err := runstate.ConnectRedisAs(ctx, svc.redisURL, "fleetsim")
	if err != nil {
		tb.Fatal(err)
	}
	defer rdb.Close()
	polls := waitFinal(tb, c, rdb, runs)
	res.LoadAfter = verdict.LoadAverage()
	if svc.tally != nil {
		counts, _, err := svc.tally.Cut(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		res.BySender = counts.Without("fleetsim")
	}

	after, err := readRedis(ctx, svc.masters, svc.nodes)
	if err != nil {
		tb.Fatal(err)
	}
	s3CPU := procCPU(svc.s3PID) - s3Before
	var requests int64
	if svc.proxy != nil {
		requests = svc.proxy.n.Load() - reqBefore
	}
	workerCPU := -workerCPUBefore
	for _, w := range workers {
		workerCPU += procCPU(w.Cmd.Process.Pid)
	}

	// What the night left: every run's record, and its graphs' results.
	recs := make([]runstate.RunStatus, len(runs))
	rs := runstate.NewRuns(rdb)
	for i, run := range runs {
		if recs[i], err = rs.Get(ctx, run); err != nil {
			tb.Fatal(err)
		}
		if recs[i].Status != runstate.RunDone {
			tb.Fatalf("run %s ended %s: %s", run, recs[i].Status, recs[i].Reason)
		}
		res.DoneGraphs += recs[i].Done
	}
	results := readResults(tb, svc.store, recs)
	for _, run := range runs {
		if _, err := svc.store.Stat(ctx, artifacts.StateKey(run)); err == nil {
			res.States++
		}
	}

	g := float64(c.Graphs())
	perGraph := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / g }
	coordCPU := nr.CPU + (after.CPU - before.CPU) + s3CPU
	// A loaded machine only stretches wall-clock figures: a row that meets
	// its target under load has met it, one that misses it may not have.
	loaded := ""
	if l := max(res.LoadBefore, res.LoadAfter); l > 2*float64(runtime.NumCPU()) {
		loaded = fmt.Sprintf("load %.1f on %d cores", l, runtime.NumCPU())
	}
	wallVerdict := func(met bool, whys ...string) string {
		if met {
			return verdict.Of(true)
		}
		return verdict.Of(false, whys...)
	}
	add := func(r Row) { res.Rows = append(res.Rows, r) }

	add(Row{Name: "coordinator CPU per graph", Value: perGraph(coordCPU),
		Measured: fmt.Sprintf("%.0f µs (producer %.0f, Redis %.0f, store %.0f)", perGraph(coordCPU), perGraph(nr.CPU), perGraph(after.CPU-before.CPU), perGraph(s3CPU)),
		Target:   "≤ 10,000 µs (1 % of a 1-s build)", Met: verdict.Of(perGraph(coordCPU) <= 10000)})
	add(Row{Name: "worker CPU per graph (information)", Value: perGraph(workerCPU),
		Measured: fmt.Sprintf("%.0f µs", perGraph(workerCPU)), Target: "—", Met: "—"})
	// The simulator's own polls of the runs' status (waitFinal) are no
	// part of the coordinator's cost: left out, as a fleet that does not
	// watch its night would not send them.
	own := map[string]int64{"hget": polls}
	cmds := float64(after.Calls-before.Calls-polls) / g
	share := ""
	if len(after.PerMaster) > 1 {
		var top, total int64
		var topCPU, totalCPU time.Duration
		for i, n := range after.PerMaster {
			d := n - before.PerMaster[i]
			top, total = max(top, d), total+d
			dc := after.MasterCPU[i] - before.MasterCPU[i]
			topCPU, totalCPU = max(topCPU, dc), totalCPU+dc
		}
		share = fmt.Sprintf(" (the busiest master %.0f %%, %.0f %% of the masters' CPU)", 100*float64(top)/float64(max(total, 1)), 100*float64(topCPU)/float64(max(totalCPU, 1)))
	}
	add(Row{Name: "Redis commands per graph", Value: cmds, Measured: fmt.Sprintf("%.1f%s: %s", cmds, share, topCommands(before, after, own, g, 5)),
		Target: "< 35", Met: verdict.Of(cmds < 35)})
	mem := float64(after.UsedMemory-before.UsedMemory) / g
	add(Row{Name: "Redis memory per graph", Value: mem, Measured: fmt.Sprintf("%.0f B", mem),
		Target: "≤ 4,096 B", Met: verdict.Of(mem <= 4096)})
	if svc.proxy != nil {
		req := float64(requests) / g
		add(Row{Name: "store requests per graph", Value: req, Measured: fmt.Sprintf("%.1f", req),
			Target: "≤ 20", Met: verdict.Of(req <= 20)})
	}
	gaps, waits := dispatch(results, recs, c.Slots)
	p50, p99 := quantile(gaps, 0.5), quantile(gaps, 0.99)
	add(Row{Name: "enqueue → start, slot free (p50/p99)", Value: p99, Wall: true,
		Measured: fmt.Sprintf("%.0f / %.0f ms", p50, p99), Target: "p50 ≤ 100 ms, p99 ≤ 1,000 ms", Met: wallVerdict(p50 <= 100 && p99 <= 1000, loaded)})
	add(Row{Name: "enqueue → start, queued (p50/p99; information)", Value: quantile(waits, 0.99), Wall: true,
		Measured: fmt.Sprintf("%s / %s", human.Duration(time.Duration(quantile(waits, 0.5)*float64(time.Millisecond))), human.Duration(time.Duration(quantile(waits, 0.99)*float64(time.Millisecond)))), Target: "—", Met: "—"})
	fin := finalizeRate(results, recs)
	add(Row{Name: "finalize throughput", Value: fin, Wall: true, Measured: fmt.Sprintf("%.0f graphs/s", fin),
		Target: "≥ 500 graphs/s", Met: wallVerdict(fin >= 500, loaded)})
	plan1 := float64(nr.Wall) / float64(time.Millisecond) / g
	add(Row{Name: "nightly plan + submit per graph", Value: plan1, Wall: true,
		Measured: fmt.Sprintf("%.2f ms (%s in all)", plan1, human.Duration(nr.Wall)), Target: "≤ 0.1 ms (10,000 graphs in a second)", Met: wallVerdict(plan1 <= 0.1, loaded)})
	for _, p := range uiTimes(tb, svc, c, recs, plan.Nightly) {
		add(Row{Name: p.name, Value: p.ms, Wall: true, Shows: p.shows, Measured: fmt.Sprintf("%.0f ms", p.ms), Target: "≤ 500 ms", Met: wallVerdict(p.ms <= 500, loaded)})
	}
	lb := lowerBound(rc, c, recs)
	// The night ends when its last run is final (its finished_at), not
	// when the poll above noticed.
	last := nightStart
	for _, r := range recs {
		if r.FinishedAt.After(last) {
			last = r.FinishedAt
		}
	}
	makespan := last.Sub(nightStart)
	ratio := float64(makespan) / float64(lb)
	busy := float64(coordCPU+workerCPU) / (float64(makespan) * float64(runtime.NumCPU()))
	why := loaded
	if busy > 0.8 {
		why = strings.TrimPrefix(why+fmt.Sprintf("; the night's own processes kept the %d cores %.0f %% busy: it measured the machine, not the scheduler", runtime.NumCPU(), 100*busy), "; ")
	}
	add(Row{Name: "makespan ÷ lower bound", Value: ratio, Wall: true,
		Measured: fmt.Sprintf("%.3f (%s ÷ %s)", ratio, human.Duration(makespan), human.Duration(lb)), Target: "≤ 1.10", Met: wallVerdict(ratio <= 1.10, why)})
	c.logf("night over: %d runs, %d graphs done, %d states, makespan %v", res.Runs, res.DoneGraphs, res.States, makespan.Round(time.Millisecond))
	for _, w := range workers {
		w.Stop(30 * time.Second)
	}
	return res
}

// waitFinal polls the runs' status (one field of each record: reading
// whole records of 500-graph runs in a loop would take CPU from the night
// it measures) until every one is final. A night that stops moving for
// c.Stall fails. It returns how many status reads it sent, which the
// Redis row leaves out.
func waitFinal(tb testing.TB, c Config, rdb redis.UniversalClient, runs []string) (polls int64) {
	tb.Helper()
	ctx := context.Background()
	pending := slices.Clone(runs)
	moved := time.Now()
	for len(pending) > 0 {
		var next []string
		for _, run := range pending {
			// The run record's key as runstate writes it (its hash tag
			// keeps a run's keys in one Cluster slot).
			s, err := rdb.HGet(ctx, "tunefleet:run:{"+run+"}", "status").Result()
			polls++
			if err != nil || !runstate.IsFinal(s) {
				next = append(next, run)
			}
		}
		if len(next) < len(pending) {
			moved = time.Now()
			c.logf("%d of %d runs final", len(runs)-len(next), len(runs))
		} else if time.Since(moved) > c.Stall {
			tb.Fatalf("no run ended for %v: %d of %d still pending (first %s)", c.Stall, len(next), len(runs), next[0])
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(time.Second)
		}
	}
	return polls
}

// graphResult is what the simulator reads of a graph's result.json.
type graphResult struct {
	run    int
	worker string
	start  time.Time
	dur    time.Duration
}

// readResults reads every graph's published result.json, 16 at a time.
func readResults(tb testing.TB, store artifacts.Store, recs []runstate.RunStatus) []graphResult {
	tb.Helper()
	type job struct {
		run   int
		graph string
	}
	var jobs []job
	for i, r := range recs {
		for g := range r.Graphs {
			jobs = append(jobs, job{i, g})
		}
	}
	out := make([]graphResult, len(jobs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				raw, err := artifacts.ReadObject(context.Background(), store, artifacts.GraphResultKey(recs[j.run].Run, j.graph), artifacts.MaxJSONSize)
				var r tuner.Result
				if err == nil {
					err = json.Unmarshal(raw, &r)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("run %s graph %s: result.json: %w", recs[j.run].Run, j.graph, err))
					mu.Unlock()
					continue
				}
				out[i] = graphResult{run: j.run, worker: r.Worker, start: r.StartedAt, dur: r.Duration}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
	return out
}

// endHeap is a worker's slots, by when each became free.
type endHeap []time.Time

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *endHeap) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// dispatch measures, per task, how long it waited to start while a slot
// of the worker that took it was free (gaps, ms): the queue's own latency,
// which at a night's scale is hidden behind the wait for a free slot
// (waits, ms: from its run's creation to its start, information).
//
// Each worker process's tasks, in start order, take a slot not used yet
// while there is one, then the slot that became free first: a slot frees at its last task's end (the tuner's start plus
// duration, so the gap also holds the worker's own work around the tuner:
// downloads, uploads, bookkeeping), or, before its first task, when the
// run was created. The gap is the start less the later of that and the
// task's run's creation.
func dispatch(results []graphResult, recs []runstate.RunStatus, slots int) (gaps, waits []float64) {
	byWorker := map[string][]graphResult{}
	for _, r := range results {
		byWorker[r.worker] = append(byWorker[r.worker], r)
		waits = append(waits, ms(r.start.Sub(recs[r.run].CreatedAt)))
	}
	for _, rs := range byWorker {
		slices.SortFunc(rs, func(a, b graphResult) int { return a.start.Compare(b.start) })
		// The slots this worker used: as many as ran at once, at most.
		var h endHeap
		for _, r := range rs {
			created := recs[r.run].CreatedAt
			free := created // a slot not used yet: free since the run was
			if h.Len() >= slots {
				free = heap.Pop(&h).(time.Time)
				if free.Before(created) {
					free = created
				}
			}
			gaps = append(gaps, ms(max(r.start.Sub(free), 0)))
			heap.Push(&h, r.start.Add(r.dur))
		}
	}
	slices.Sort(gaps)
	slices.Sort(waits)
	return gaps, waits
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// finalizeRate is the graphs finalized per second of finalize: each run's
// finalize took from its last graph's end to its record's finish.
func finalizeRate(results []graphResult, recs []runstate.RunStatus) float64 {
	lastEnd := make([]time.Time, len(recs))
	for _, r := range results {
		if e := r.start.Add(r.dur); e.After(lastEnd[r.run]) {
			lastEnd[r.run] = e
		}
	}
	var total time.Duration
	graphs := 0
	for i, r := range recs {
		if lastEnd[i].IsZero() || r.FinishedAt.Before(lastEnd[i]) {
			continue
		}
		total += r.FinishedAt.Sub(lastEnd[i])
		graphs += r.Total
	}
	if total <= 0 {
		return 0
	}
	return float64(graphs) / total.Seconds()
}

// lowerBound is the night's shortest possible makespan: the simulated
// work, compressed, spread evenly over every slot, and never less than
// its longest graph.
func lowerBound(rc replay.Config, c Config, recs []runstate.RunStatus) time.Duration {
	var sum, longest time.Duration
	for _, r := range recs {
		for g := range r.Graphs {
			d := rc.Compressed(rc.Simulated(r.Model, g, Candidate))
			sum += d
			longest = max(longest, d)
		}
	}
	return max(sum/time.Duration(c.Workers()), longest)
}

type pageTime struct {
	name  string
	ms    float64
	shows float64 // how much the view shows; 0 for a view of a fixed size
}

// uiTimes starts `producer serve` over the night and times its pages and
// `producer runs` (medians of 3, after one warm-up each).
func uiTimes(tb testing.TB, svc *services, c Config, recs []runstate.RunStatus, nightly string) []pageTime {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := stack.StartProducerProcess(tb, svc.env, "serve", "--listen", addr, "--redis", svc.redisURL, "--store", svc.storeURL)
	defer srv.Kill()
	base := "http://" + addr
	stack.Poll(tb, c.Stall, "producer serve answering", func() (bool, string) {
		if srv.Exited() {
			tb.Fatalf("producer serve exited:\n%s", srv.Log())
		}
		resp, err := http.Get(base + "/fleet")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	// The largest run: its page lists the most graphs.
	big := recs[0]
	for _, r := range recs {
		if r.Total > big.Total {
			big = r
		}
	}
	pages := []struct {
		name, path string
		shows      float64
	}{
		{"UI: runs page", "/", 0}, // one page of runs
		{"UI: nightly page", "/nightly/" + nightly, float64(c.Graphs())},
		{"UI: fleet page", "/fleet", float64(c.Models)},
		{"UI: model page", "/models/" + big.Model, 0}, // one run of the model
		{"UI: run page (largest run)", "/runs/" + big.Run, float64(big.Total)},
	}
	var out []pageTime
	for _, p := range pages {
		var xs []float64
		for i := range 4 {
			start := time.Now()
			resp, err := http.Get(base + p.path)
			if err != nil {
				tb.Fatalf("GET %s: %v", p.path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				tb.Fatalf("GET %s: %s", p.path, resp.Status)
			}
			if i > 0 {
				xs = append(xs, ms(time.Since(start)))
			}
		}
		out = append(out, pageTime{p.name, median(xs), p.shows})
	}
	for _, cmd := range []struct {
		name string
		args []string
	}{
		{"`producer runs --limit 20`", []string{"runs", "--limit", "20"}},
		{"`producer runs --model M`", []string{"runs", "--model", big.Model, "--limit", "20"}},
	} {
		var xs []float64
		for i := range 4 {
			r := stack.RunProducer(tb, svc.env, append(cmd.args, "--redis", svc.redisURL, "--store", svc.storeURL)...)
			if r.Code != 0 {
				tb.Fatalf("producer %s: %s", strings.Join(cmd.args, " "), r)
			}
			if i > 0 {
				xs = append(xs, ms(r.Wall))
			}
		}
		out = append(out, pageTime{cmd.name, median(xs), 0})
	}
	return out
}

// thousands writes n with thousands separators: 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// queueNames names the night's n target classes. On a Cluster every key
// of an asynq queue carries the queue's name as its hash tag, so a class
// is one slot and one master: the names are chosen (by suffix) so that
// each class's slot is on a master no earlier class uses, while masters
// last, which is how an operator would spread classes over masters.
func queueNames(tb testing.TB, svc *services, base string, n int) []string {
	tb.Helper()
	if n == 1 {
		return []string{base}
	}
	if len(svc.masters) < 2 {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-c%d", base, i)
		}
		return names
	}
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: svc.nodes})
	defer rdb.Close()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		tb.Fatalf("CLUSTER SLOTS: %v", err)
	}
	masterOf := func(slot int64) string {
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	used := map[string]int{}
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("%s-c%d", base, i)
		slot, err := rdb.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			tb.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		m := masterOf(slot)
		// A master takes a second class only once every master has one.
		if used[m] > len(names)/len(svc.masters) {
			continue
		}
		used[m]++
		names = append(names, name)
	}
	return names
}
