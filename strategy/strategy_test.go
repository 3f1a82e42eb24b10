package strategy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/noise"
)

// st is one benchmark: batch size and mean latency, with throughput derived
// the way backend.Summarise derives it.
// st is a measurement of 100 calls in 5 interleaved rounds whose estimates
// spread by ±0.1 %: figures that differ by more than a few percent differ
// beyond noise, equal figures are a tie.
func st(bs int, meanMs float64) backend.Stats {
	return backend.Stats{BatchSize: bs, Samples: 100, MeanMs: meanMs, EstimateMs: meanMs, Throughput: float64(bs) * 1000 / meanMs,
		RoundMs: []float64{meanMs, meanMs * 1.001, meanMs * 0.999, meanMs * 1.0005, meanMs * 0.9995}, Interleaved: true}
}

func passed(cand string, stats ...backend.Stats) backend.CandidateResult {
	return backend.CandidateResult{Candidate: cand, Status: backend.StatusPassed, Benchmarks: stats}
}

// failed records a failure the way the tuner does: through backend.InfoOf
// of a real *backend.Failure.
func failed(cand string, class backend.FailureClass, op, msg string) backend.CandidateResult {
	return backend.CandidateResult{
		Candidate: cand,
		Status:    backend.StatusFailed,
		Failure:   backend.InfoOf(backend.Failf(class, op, "%s", msg), backend.FailRuntime),
	}
}

func skipped(cand string) backend.CandidateResult {
	return backend.CandidateResult{Candidate: cand, Status: backend.StatusSkipped}
}

func mustParse(t *testing.T, name string, budget float64) Strategy {
	t.Helper()
	s, err := Parse(name, budget)
	if err != nil {
		t.Fatalf("Parse(%q, %g): %v", name, budget, err)
	}
	return s
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		budget  float64
		wantErr string
	}{
		{FirstWins, 0, ""},
		{OneBackend, 0, ""},
		{MaxThroughput, 0, ""},
		{MinLatency, 0, ""},
		{LatencyBudget, 12.5, ""},
		{"fastest", 0, `unknown strategy "fastest" (want one of first-wins, one-backend, max-throughput, min-latency, latency-budget)`},
		{"", 0, `unknown strategy ""`},
		{"Max-Throughput", 0, `unknown strategy "Max-Throughput"`},
		{LatencyBudget, 0, `strategy latency-budget needs a latency budget in ms greater than 0 (got 0)`},
		{LatencyBudget, -5, `greater than 0 (got -5)`},
		{MaxThroughput, 10, `a latency budget (10 ms) applies only to strategy latency-budget, not "max-throughput"`},
		{FirstWins, -1, `applies only to strategy latency-budget`},
		{"nope", 10, `applies only to strategy latency-budget, not "nope"`},
	}
	for _, tc := range tests {
		s, err := Parse(tc.name, tc.budget)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q, %g) error %v, want one containing %q", tc.name, tc.budget, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q, %g): %v", tc.name, tc.budget, err)
			continue
		}
		if s.Name() != tc.name || s.LatencyBudgetMs() != tc.budget {
			t.Errorf("Parse(%q, %g) = %s with budget %g", tc.name, tc.budget, s.Name(), s.LatencyBudgetMs())
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"first-wins", "one-backend", "max-throughput", "min-latency", "latency-budget"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestCheckCandidates(t *testing.T) {
	one := []backend.Candidate{{Backend: "ort", Positionals: []string{"cpu"}}}
	two := []backend.Candidate{{Backend: "trt", Positionals: []string{"fp16"}}, {Backend: "ort", Positionals: []string{"cpu"}}}
	for _, name := range Names() {
		budget := 0.0
		if name == LatencyBudget {
			budget = 10
		}
		s := mustParse(t, name, budget)
		if err := s.CheckCandidates(nil); err == nil || !strings.Contains(err.Error(), "strategy "+name) {
			t.Errorf("%s: no candidates: error %v, want one naming the strategy", name, err)
		}
		if err := s.CheckCandidates(one); err != nil {
			t.Errorf("%s: one candidate: %v", name, err)
		}
		err := s.CheckCandidates(two)
		if name == OneBackend {
			if err == nil || !strings.Contains(err.Error(), "exactly one candidate, got 2 [trt:fp16 ort:cpu]") {
				t.Errorf("%s: two candidates: error %v", name, err)
			}
		} else if err != nil {
			t.Errorf("%s: two candidates: %v", name, err)
		}
	}
}

func TestPlan(t *testing.T) {
	sizes := []int{1, 2, 4, 8}
	sweep := backend.DefaultSweepRule()
	budgetSweep := sweep
	budgetSweep.LatencyBudgetMs = 10
	tests := []struct {
		strategy string
		budget   float64
		in       []int
		want     Plan
	}{
		{FirstWins, 0, sizes, Plan{BatchSizes: sizes, Sweep: sweep, ForTheRecord: true}},
		{FirstWins, 0, nil, Plan{Sweep: sweep, ForTheRecord: true}},
		{OneBackend, 0, sizes, Plan{BatchSizes: sizes, Sweep: sweep, ForTheRecord: true}},
		{MaxThroughput, 0, sizes, Plan{BatchSizes: sizes, Sweep: sweep}},
		{MaxThroughput, 0, []int{}, Plan{Sweep: sweep}},
		{MinLatency, 0, sizes, Plan{BatchSizes: []int{1}}},
		{MinLatency, 0, []int{8, 4, 16}, Plan{BatchSizes: []int{4}}}, // batch axis starting at 4
		{MinLatency, 0, nil, Plan{}},                                 // no batch axis: raw sample
		{LatencyBudget, 10, sizes, Plan{BatchSizes: sizes, Sweep: budgetSweep}},
		{LatencyBudget, 10, nil, Plan{Sweep: budgetSweep}},
	}
	for _, tc := range tests {
		in := slices.Clone(tc.in)
		got := mustParse(t, tc.strategy, tc.budget).Plan(in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s.Plan(%v) = %+v, want %+v", tc.strategy, tc.in, got, tc.want)
		}
		// The plan must not alias the caller's slice.
		for i := range in {
			in[i] = -1
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s.Plan(%v) changed when its argument did: %+v", tc.strategy, tc.in, got)
		}
	}
}

func TestDone(t *testing.T) {
	bad := failed("trt:fp16", backend.FailBuild, "build", "unsupported op")
	good := passed("ort:cpu", st(1, 1))
	tests := []struct {
		strategy string
		results  []backend.CandidateResult
		want     bool
	}{
		{FirstWins, nil, false},
		{FirstWins, []backend.CandidateResult{bad}, false},
		{FirstWins, []backend.CandidateResult{good}, true}, // nothing more is built after the first pass
		{FirstWins, []backend.CandidateResult{bad, good}, true},
		{FirstWins, []backend.CandidateResult{bad, bad}, false},
		{OneBackend, nil, false},
		{OneBackend, []backend.CandidateResult{bad}, true},
		{OneBackend, []backend.CandidateResult{good}, true},
		{MaxThroughput, []backend.CandidateResult{good}, false},
		{MaxThroughput, []backend.CandidateResult{good, good, bad}, false},
		{MinLatency, []backend.CandidateResult{good}, false},
		{LatencyBudget, []backend.CandidateResult{good}, false},
	}
	for _, tc := range tests {
		budget := 0.0
		if tc.strategy == LatencyBudget {
			budget = 10
		}
		if got := mustParse(t, tc.strategy, budget).Done(tc.results); got != tc.want {
			t.Errorf("%s.Done(%d results) = %v, want %v", tc.strategy, len(tc.results), got, tc.want)
		}
	}
}

func TestSelect(t *testing.T) {
	build := failed("trt:fp16", backend.FailBuild, "build", "unsupported op Foo")
	wrong := failed("trt:int8", backend.FailWrongAnswer, "check", `output "y": 3 of 10 elements out of tolerance`)
	timeout := failed("trt:best", backend.FailTimeout, "build", "trtexec ran past 30m0s")
	noInfo := backend.CandidateResult{Candidate: "ort:cuda", Status: backend.StatusFailed}

	type want struct {
		sel    Selection // Reason is matched as a substring
		class  backend.FailureClass
		msg    []string // substrings of the error, in order; nil: success
		plain  bool     // the error must not be a *backend.Failure
		exact  string   // when set, the whole error text
		noText []string // substrings the error must not contain
	}
	tests := []struct {
		name     string
		strategy string
		budget   float64
		results  []backend.CandidateResult
		want     want
	}{
		// first-wins
		{
			name: "first-wins: the first pass wins, its best throughput recorded", strategy: FirstWins,
			results: []backend.CandidateResult{passed("a", st(1, 1), st(2, 1), st(4, 4)), passed("b", st(8, 1))},
			want:    want{sel: Selection{Index: 0, Candidate: "a", Metric: "throughput", Value: 2000, BatchSize: 2, Reason: "first candidate to pass"}},
		},
		{
			name: "first-wins: failures before it are skipped", strategy: FirstWins,
			results: []backend.CandidateResult{build, wrong, passed("c", st(1, 2)), passed("d", st(1, 1))},
			want:    want{sel: Selection{Index: 2, Candidate: "c", Metric: "throughput", Value: 500, BatchSize: 1, Reason: "after 2 that did not"}},
		},
		{
			name: "first-wins: unmeasured winner has no metric", strategy: FirstWins,
			results: []backend.CandidateResult{passed("a")},
			want:    want{sel: Selection{Index: 0, Candidate: "a", Reason: "first candidate to pass"}},
		},
		{
			name: "first-wins: none passed, class of the last failure", strategy: FirstWins,
			results: []backend.CandidateResult{build, wrong},
			want: want{class: backend.FailWrongAnswer, exact: `select: no candidate passed: ` +
				`trt:fp16: build failed (build): unsupported op Foo; ` +
				`trt:int8: check failed (wrong_answer): output "y": 3 of 10 elements out of tolerance`},
		},
		{
			name: "first-wins: a retryable failure anywhere makes it infrastructure", strategy: FirstWins,
			results: []backend.CandidateResult{timeout, build},
			want:    want{class: backend.FailInfrastructure, msg: []string{"no candidate passed: ", "trt:best: build failed (timeout): trtexec ran past", "trt:fp16: build failed (build)"}},
		},
		{
			name: "first-wins: failure without a recorded reason", strategy: FirstWins,
			results: []backend.CandidateResult{noInfo},
			want:    want{class: backend.FailRuntime, msg: []string{"ort:cuda: runtime failure: failed without a recorded reason"}},
		},
		{
			name: "first-wins: skipped only", strategy: FirstWins,
			results: []backend.CandidateResult{skipped("a")},
			want:    want{class: backend.FailRuntime, msg: []string{"no candidate passed: a: skipped"}},
		},
		{
			name: "first-wins: no results", strategy: FirstWins,
			want: want{plain: true, msg: []string{"no candidate results"}},
		},
		// one-backend
		{
			name: "one-backend: passed", strategy: OneBackend,
			results: []backend.CandidateResult{passed("a", st(4, 2))},
			want:    want{sel: Selection{Index: 0, Candidate: "a", Metric: "throughput", Value: 2000, BatchSize: 4, Reason: "the only candidate"}},
		},
		{
			name: "one-backend: its build failure is the graph's, class and op kept", strategy: OneBackend,
			results: []backend.CandidateResult{build},
			want:    want{class: backend.FailBuild, exact: "build: candidate trt:fp16: unsupported op Foo"},
		},
		{
			name: "one-backend: wrong answer kept", strategy: OneBackend,
			results: []backend.CandidateResult{wrong},
			want:    want{class: backend.FailWrongAnswer, exact: `check: candidate trt:int8: output "y": 3 of 10 elements out of tolerance`},
		},
		{
			name: "one-backend: timeout stays retryable", strategy: OneBackend,
			results: []backend.CandidateResult{timeout},
			want:    want{class: backend.FailTimeout, msg: []string{"candidate trt:best: trtexec ran past 30m0s"}},
		},
		{
			name: "one-backend: two results", strategy: OneBackend,
			results: []backend.CandidateResult{passed("a", st(1, 1)), passed("b", st(1, 1))},
			want:    want{plain: true, msg: []string{"2 candidate results, want exactly one"}},
		},
		{
			name: "one-backend: skipped", strategy: OneBackend,
			results: []backend.CandidateResult{skipped("a")},
			want:    want{plain: true, msg: []string{"candidate a was not tried (status skipped)"}},
		},
		// max-throughput
		{
			name: "max-throughput: highest best throughput across batch sizes", strategy: MaxThroughput,
			results: []backend.CandidateResult{
				passed("a", st(1, 1), st(2, 2)),         // 1000, 1000
				passed("b", st(1, 2), st(8, 2.5)),       // 500, 3200
				passed("c", st(1, 0.5), st(16, 8.0001)), // 2000, ~1999.98
			},
			want: want{sel: Selection{Index: 1, Candidate: "b", Metric: "throughput", Value: 3200, BatchSize: 8, Reason: "highest throughput 3200 samples/s at batch 8; 1.600× the runner-up c"}},
		},
		{
			name: "max-throughput: tie goes to the earlier candidate", strategy: MaxThroughput,
			results: []backend.CandidateResult{passed("a", st(2, 1)), passed("b", st(4, 2)), passed("c", st(1, 1))},
			want:    want{sel: Selection{Index: 0, Candidate: "a", Metric: "throughput", Value: 2000, BatchSize: 2}},
		},
		{
			name: "max-throughput: failed and unmeasured candidates are skipped", strategy: MaxThroughput,
			results: []backend.CandidateResult{
				{Candidate: "fast-but-wrong", Status: backend.StatusFailed, Benchmarks: []backend.Stats{st(64, 1)},
					Failure: &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "wrong"}},
				passed("unmeasured"),
				passed("zero", backend.Stats{BatchSize: 1}),
				passed("slow", st(1, 10)),
				build,
			},
			want: want{sel: Selection{Index: 3, Candidate: "slow", Metric: "throughput", Value: 100, BatchSize: 1}},
		},
		{
			name: "max-throughput: none passed", strategy: MaxThroughput,
			results: []backend.CandidateResult{wrong, passed("unmeasured"), build},
			want: want{class: backend.FailBuild, msg: []string{"select: no correct backend found: ",
				"trt:int8: check failed (wrong_answer)", "unmeasured: passed, but nothing was measured", "trt:fp16: build failed (build)"}},
		},
		{
			name: "max-throughput: none passed, one timed out", strategy: MaxThroughput,
			results: []backend.CandidateResult{timeout, wrong},
			want:    want{class: backend.FailInfrastructure, msg: []string{"no correct backend found"}},
		},
		// min-latency
		{
			name: "min-latency: lowest mean latency", strategy: MinLatency,
			results: []backend.CandidateResult{passed("a", st(1, 3)), build, passed("b", st(1, 1.5)), passed("c", st(1, 2))},
			want:    want{sel: Selection{Index: 2, Candidate: "b", Metric: "latency_ms", Value: 1.5, BatchSize: 1, Reason: "lowest latency 1.5 ms at batch 1; 1.333× the runner-up c"}},
		},
		{
			name: "min-latency: tie goes to the earlier candidate", strategy: MinLatency,
			results: []backend.CandidateResult{passed("a", st(1, 2)), passed("b", st(1, 2))},
			want:    want{sel: Selection{Index: 0, Candidate: "a", Metric: "latency_ms", Value: 2, BatchSize: 1}},
		},
		{
			name: "min-latency: compared at the smallest batch size", strategy: MinLatency,
			results: []backend.CandidateResult{passed("a", st(2, 0.5), st(1, 3)), passed("b", st(1, 2))},
			want:    want{sel: Selection{Index: 1, Candidate: "b", Metric: "latency_ms", Value: 2, BatchSize: 1}},
		},
		{
			name: "min-latency: unmeasured skipped", strategy: MinLatency,
			results: []backend.CandidateResult{passed("zero", backend.Stats{BatchSize: 1}), passed("b", st(1, 7))},
			want:    want{sel: Selection{Index: 1, Candidate: "b", Metric: "latency_ms", Value: 7, BatchSize: 1}},
		},
		{
			name: "min-latency: none passed", strategy: MinLatency,
			results: []backend.CandidateResult{build, wrong},
			want:    want{class: backend.FailWrongAnswer, msg: []string{"no correct backend found"}},
		},
		// latency-budget
		{
			name: "latency-budget: best throughput within the budget", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{
				passed("a", st(1, 2), st(8, 8), st(16, 20)), // 500, 1000, 800 (over)
				passed("b", st(1, 1), st(32, 12)),           // 1000 (tie with a), 2666 (over)
				passed("c", st(1, 4), st(4, 5)),             // 250, 800
			},
			want: want{sel: Selection{Index: 0, Candidate: "a", Metric: "throughput", Value: 1000, BatchSize: 8,
				Reason: "highest throughput 1000 samples/s at batch 8 within the 10 ms budget (mean 8 ms); a tie within noise with b"}},
		},
		{
			name: "latency-budget: exactly at the budget complies", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{passed("a", st(1, 5)), passed("b", st(16, 10))},
			want:    want{sel: Selection{Index: 1, Candidate: "b", Metric: "throughput", Value: 1600, BatchSize: 16}},
		},
		{
			name: "latency-budget: a candidate with no compliant batch size does not qualify", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{passed("fast-but-slow", st(64, 11)), passed("b", st(1, 9))},
			want:    want{sel: Selection{Index: 1, Candidate: "b", Metric: "throughput", BatchSize: 1, Value: 1000.0 / 9}},
		},
		{
			name: "latency-budget: nobody meets it, deterministic even with build failures", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{passed("a", st(1, 15)), build, passed("b", st(1, 12), st(2, 30))},
			want: want{class: backend.FailRuntime, msg: []string{
				"select: no candidate met the latency budget of 10 ms (fastest mean latency 12 ms: b at batch 1): ",
				"a: passed, but no batch size within the budget (fastest mean 15 ms at batch 1)",
				"trt:fp16: build failed (build)",
				"b: passed, but no batch size within the budget (fastest mean 12 ms at batch 1)"}},
		},
		{
			name: "latency-budget: nobody meets it, but a timed-out candidate might have", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{passed("a", st(1, 15)), timeout},
			want:    want{class: backend.FailInfrastructure, msg: []string{"no candidate met the latency budget of 10 ms"}},
		},
		{
			name: "latency-budget: none passed", strategy: LatencyBudget, budget: 10,
			results: []backend.CandidateResult{wrong},
			want:    want{class: backend.FailWrongAnswer, msg: []string{"no correct backend found"}, noText: []string{"latency budget"}},
		},
		{
			name: "latency-budget: no results", strategy: LatencyBudget, budget: 10,
			want: want{plain: true, msg: []string{"no candidate results"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := mustParse(t, tc.strategy, tc.budget).Select(tc.results)
			w := tc.want
			if w.msg == nil && w.exact == "" {
				if err != nil {
					t.Fatalf("Select: %v", err)
				}
				reason := w.sel.Reason
				gotReason := sel.Reason
				sel.Reason, w.sel.Reason = "", ""
				if w.sel.Decision == "" {
					sel.Decision, sel.RunnerUp, sel.Margin, sel.Tied, sel.TieBreak = "", "", nil, nil, ""
				}
				if !reflect.DeepEqual(sel, w.sel) {
					t.Fatalf("Select = %+v, want %+v", sel, w.sel)
				}
				if !strings.Contains(gotReason, reason) {
					t.Fatalf("Reason %q lacks %q", gotReason, reason)
				}
				if gotReason == "" {
					t.Fatalf("empty Reason")
				}
				return
			}
			if err == nil {
				t.Fatalf("Select = %+v, want an error", sel)
			}
			text := err.Error()
			if w.exact != "" && text != w.exact {
				t.Fatalf("error\n %q\nwant\n %q", text, w.exact)
			}
			rest := text
			for _, sub := range w.msg {
				i := strings.Index(rest, sub)
				if i < 0 {
					t.Fatalf("error %q\n lacks (in order) %q", text, sub)
				}
				rest = rest[i+len(sub):]
			}
			for _, sub := range w.noText {
				if strings.Contains(text, sub) {
					t.Fatalf("error %q contains %q", text, sub)
				}
			}
			var f *backend.Failure
			if w.plain {
				if errors.As(err, &f) {
					t.Fatalf("error %q is a *backend.Failure, want a plain error", text)
				}
				return
			}
			if !errors.As(err, &f) {
				t.Fatalf("error %q is not a *backend.Failure", text)
			}
			if f.Class != w.class {
				t.Fatalf("class %q, want %q (error %q)", f.Class, w.class, text)
			}
			if got := backend.ClassOf(err, backend.FailRuntime); got != w.class {
				t.Fatalf("ClassOf = %q, want %q", got, w.class)
			}
		})
	}
}

// TestFirstWinsBuildsNothingAfterAPass drives the loop a tuner runs: build
// candidates in order until Done, then Select.
func TestFirstWinsBuildsNothingAfterAPass(t *testing.T) {
	outcomes := []backend.CandidateResult{
		failed("trt:fp16", backend.FailBuild, "build", "unsupported op"),
		passed("trt:fp32", st(1, 2)),
		passed("ort:cpu", st(1, 1)), // faster, but must never be built
	}
	s := mustParse(t, FirstWins, 0)
	var results []backend.CandidateResult
	for _, o := range outcomes {
		if s.Done(results) {
			break
		}
		results = append(results, o)
	}
	if len(results) != 2 {
		t.Fatalf("built %d candidates, want 2", len(results))
	}
	sel, err := s.Select(results)
	if err != nil || sel.Candidate != "trt:fp32" {
		t.Fatalf("Select = %+v, %v; want trt:fp32", sel, err)
	}
}

// noisy is a measurement whose rounds spread by ±5 % around meanMs.
func noisy(bs int, meanMs float64) backend.Stats {
	s := st(bs, meanMs)
	s.RoundMs = []float64{meanMs * 0.95, meanMs * 1.05, meanMs * 1.02, meanMs * 0.97, meanMs}
	return s
}

// A winner is declared only beyond noise; within it, the tie-break (the
// first listed of the tied) picks, whatever the point estimates say, and
// the result records the tie, its margin and interval (issue 19).
func TestSelectDecidesBeyondNoiseOrTies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy string
		results  []backend.CandidateResult
		winner   string
		decision string
		tied     []string
	}{
		{"within noise: the first listed wins though the second measured 1 % faster", MaxThroughput,
			[]backend.CandidateResult{passed("a", noisy(1, 1.01)), passed("b", noisy(1, 1.0))}, "a", DecisionTie, []string{"a", "b"}},
		{"identical engines share one measurement: a tie", MaxThroughput,
			[]backend.CandidateResult{passed("x", st(4, 2)), passed("y", st(4, 2))}, "x", DecisionTie, []string{"x", "y"}},
		{"1.3x beyond noise: the faster wins, wherever it is listed", MaxThroughput,
			[]backend.CandidateResult{passed("a", noisy(1, 1.3)), passed("b", noisy(1, 1.0))}, "b", DecisionBeyondNoise, nil},
		{"min-latency: a tie among two, the third is slower beyond noise", MinLatency,
			[]backend.CandidateResult{passed("slow", noisy(1, 2)), passed("a", noisy(1, 1.01)), passed("b", noisy(1, 1.0))}, "a", DecisionTie, []string{"a", "b"}},
		{"one measured candidate", MaxThroughput,
			[]backend.CandidateResult{passed("a", noisy(1, 1))}, "a", DecisionAlone, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := mustParse(t, tc.strategy, 0).Select(tc.results)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Candidate != tc.winner || sel.Decision != tc.decision || !reflect.DeepEqual(sel.Tied, tc.tied) {
				t.Fatalf("winner %s, decision %s, tied %v; want %s, %s, %v (%s)", sel.Candidate, sel.Decision, sel.Tied, tc.winner, tc.decision, tc.tied, sel.Reason)
			}
			switch tc.decision {
			case DecisionTie:
				if sel.TieBreak != TieBreakOrder || sel.Margin == nil || sel.Margin.Lo > 1+noise.MinGain || !strings.Contains(sel.Reason, "a tie ") {
					t.Errorf("tie recorded as %+v", sel)
				}
			case DecisionBeyondNoise:
				if sel.Margin == nil || sel.Margin.Lo <= 1+noise.MinGain || sel.RunnerUp == "" || sel.TieBreak != "" {
					t.Errorf("win recorded as %+v, margin %+v", sel, sel.Margin)
				}
			}
		})
	}
}

// A tie says which kind it is: an interval that includes 1 is within
// noise; one that excludes 1 but not 1 + MinGain is a real difference under
// the minimum gain (issue 19's wording: "within noise" there was untrue).
func TestTieReasonSaysWhichTie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		margin noise.Ratio
		want   string
	}{
		{"interval includes 1", noise.Ratio{Value: 1.01, Lo: 0.98, Hi: 1.04, Rounds: 10}, "a tie within noise with b (1.010×, 0.980–1.040, 10 rounds)"},
		{"faster but under the gain", noise.Ratio{Value: 1.03, Lo: 1.01, Hi: 1.05, Rounds: 10}, "a tie under the 5 % minimum gain with b (1.030×"},
		{"slower but under the gain", noise.Ratio{Value: 0.97, Lo: 0.96, Hi: 0.99, Rounds: 10}, "a tie under the 5 % minimum gain with b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.margin
			s := Selection{Decision: DecisionTie, Margin: &m, RunnerUp: "b", Tied: []string{"a", "b"}}
			if got := s.decisionText(); !strings.Contains(got, tc.want) {
				t.Errorf("reason %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// The reason explains the candidate it names and agrees with the table
// beside it (issue 30): when the tie-break picks a candidate that did not
// measure fastest, its figure is not called the highest (lowest), and the
// fastest is named with its own figure; identical engines are said to be
// one engine measured once, with no ratio.
func TestReasonAgreesWithTheFigures(t *testing.T) {
	same := func(r backend.CandidateResult, as string) backend.CandidateResult { r.SameEngineAs = as; return r }
	for _, tc := range []struct {
		name     string
		strategy string
		results  []backend.CandidateResult
		winner   string
		want     []string // the reason contains each
		not      []string // and none of these
		margin   bool     // a margin (with its ratio) is recorded
	}{
		{"the first listed of three ties wins, the fastest is the third", MaxThroughput,
			[]backend.CandidateResult{passed("basic", noisy(64, 1.01)), passed("ext", noisy(64, 1.005)), passed("all", noisy(64, 1.0))},
			"basic", []string{"throughput 63.4k samples/s at batch 64", "a tie under the 5 % minimum gain with the fastest, all at 64k samples/s (0.990×", "the first listed of 3 tied wins"},
			[]string{"highest"}, true},
		{"the tie's winner is also the fastest", MaxThroughput,
			[]backend.CandidateResult{passed("basic", noisy(64, 1.0)), passed("all", noisy(64, 1.01))},
			"basic", []string{"highest throughput 64k samples/s at batch 64; a tie under the 5 % minimum gain with all (1.010×"}, []string{"the fastest"}, true},
		{"min-latency: the tie-break's pick is not the lowest", MinLatency,
			[]backend.CandidateResult{passed("a", noisy(1, 1.01)), passed("b", noisy(1, 1.0))},
			"a", []string{"latency 1.01 ms at batch 1", "the fastest, b at 1 ms"}, []string{"lowest"}, true},
		{"byte-identical engines: one measured, no ratio", MaxThroughput,
			[]backend.CandidateResult{passed("disabled", st(32, 2)), same(passed("basic", st(32, 2)), "disabled"), same(passed("all", st(32, 2)), "disabled")},
			"disabled", []string{"highest throughput 16k samples/s at batch 32; identical engines (one measured): basic, all: the first listed of 3 tied wins"},
			[]string{"×", "a tie within noise"}, false},
		{"identical engines beside a measured tie", MaxThroughput,
			[]backend.CandidateResult{passed("a", noisy(4, 1.01)), same(passed("b", noisy(4, 1.01)), "a"), passed("c", noisy(4, 1.0))},
			"a", []string{"with the fastest, c at 4000 samples/s", "; identical engines (one measured): b: the first listed of 3 tied wins"}, []string{"with b ("}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := mustParse(t, tc.strategy, 0).Select(tc.results)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Candidate != tc.winner || sel.Decision != DecisionTie || (sel.Margin != nil) != tc.margin {
				t.Fatalf("winner %s, decision %s, margin %v; want %s, a tie, margin %v (%s)", sel.Candidate, sel.Decision, sel.Margin, tc.winner, tc.margin, sel.Reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(sel.Reason, w) {
					t.Errorf("reason %q lacks %q", sel.Reason, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(sel.Reason, n) {
					t.Errorf("reason %q has %q", sel.Reason, n)
				}
			}
		})
	}
}
