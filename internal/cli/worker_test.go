package cli_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// readResult reads OUT/graphs/GRAPH/result.json.
func readResult(t testing.TB, out, graph string) *tuner.Result {
	t.Helper()
	r, err := tuner.ReadResult(filepath.Join(out, "graphs", graph, tuner.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if r.Format != "tunefleet.result/v1" || r.Graph != graph {
		t.Errorf("result.json: format %q, graph %q", r.Format, r.Graph)
	}
	return r
}

// tableRows returns the lines of a tune table that start with graph and
// candidate.
func tableRows(stdout, graph, candidate string) []string {
	var rows []string
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == graph && f[1] == candidate {
			rows = append(rows, line)
		}
	}
	return rows
}

func TestTuneAllLevels(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := filepath.Join(t.TempDir(), "mlp-bundle")
	producer(t, "bundle", "from-onnx", writeMLP(t), "--shape", "input:1x64..16x64", "--samples", "3", "--out", dir).wantCode(t, cli.ExitOK)
	out := filepath.Join(t.TempDir(), "result")
	cands := []string{"ort:cpu:disabled", "ort:cpu:basic", "ort:cpu:extended", "ort:cpu:all"}
	o := worker(t, "tune", dir, "--candidates", strings.Join(cands, ","), "--strategy", "max-throughput",
		"--bench-time", benchTime, "--out", out, "--progress")
	o.wantCode(t, cli.ExitOK)

	// The table: a header, a passed row per candidate, one winner.
	if !strings.HasPrefix(o.stdout, "GRAPH") || !strings.Contains(o.stdout, "CANDIDATE") || !strings.Contains(o.stdout, "STATUS") {
		t.Errorf("no table header:\n%s", o.stdout)
	}
	winners := 0
	for _, c := range cands {
		rows := tableRows(o.stdout, "0", c)
		if len(rows) != 1 || !strings.Contains(rows[0], " passed ") {
			t.Errorf("candidate %s: rows %q, want one passed row", c, rows)
			continue
		}
		if strings.Contains(rows[0], "winner") {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d winner rows, want 1:\n%s", winners, o.stdout)
	}
	if want := "results: " + filepath.Join(out, "graphs", "*", "result.json"); !strings.Contains(o.stdout, want) {
		t.Errorf("stdout does not say %q:\n%s", want, o.stdout)
	}
	// Progress goes to stderr (--progress, as stderr is no terminal
	// here): each candidate's phases and batch sizes as they start, and
	// its outcome.
	for _, want := range []string{"graph 0: ort:cpu:extended (3/4): building\n", "graph 0: ort:cpu:extended (3/4): measuring batch 1\n"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, o.stderr)
		}
	}
	// all is measured too, or said to be the same engine as one that is
	// (ONNX Runtime often writes the same model for extended and all).
	if !strings.Contains(o.stderr, "graph 0: ort:cpu:all (4/4): measuring batch 1\n") && !strings.Contains(o.stderr, "graph 0: ort:cpu:all: the same engine as ") {
		t.Errorf("stderr neither measures ort:cpu:all nor names its identical engine:\n%s", o.stderr)
	}
	if !strings.Contains(o.stderr, "graph 0: winner ") || !strings.Contains(o.stderr, "correct on 3 sample(s)") {
		t.Errorf("no progress on stderr:\n%s", o.stderr)
	}

	// result.json records the run and a winner whose engine is on disk.
	raw, err := os.ReadFile(filepath.Join(out, "graphs", "0", "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Format != "tunefleet.result/v1" {
		t.Fatalf("result.json format %q (%v)", head.Format, err)
	}
	r := readResult(t, out, "0")
	if r.Model != "mlp" || r.Strategy != strategy.MaxThroughput || !slices.Equal(r.Candidates, cands) {
		t.Errorf("result.json: model %q, strategy %q, candidates %v", r.Model, r.Strategy, r.Candidates)
	}
	if r.Failure != nil {
		t.Errorf("result.json has a failure: %+v", r.Failure)
	}
	for i, c := range r.Results {
		if c.Status != backend.StatusPassed || c.CheckedAt != 3 || len(c.Benchmarks) == 0 {
			t.Errorf("result %d (%s): status %s, %d samples checked, %d benchmarks", i, c.Candidate, c.Status, c.CheckedAt, len(c.Benchmarks))
		}
		for _, s := range c.Benchmarks {
			if s.BatchSize < 1 || s.BatchSize > 16 {
				t.Errorf("%s benchmarked batch %d, outside the profile 1..16", c.Candidate, s.BatchSize)
			}
		}
	}
	if r.Winner == nil {
		t.Fatal("result.json has no winner")
	}
	if r.Winner.Candidate != cands[r.Winner.Index] {
		t.Errorf("winner %s at index %d", r.Winner.Candidate, r.Winner.Index)
	}
	if !strings.Contains(tableRows(o.stdout, "0", r.Winner.Candidate)[0], "winner") {
		t.Errorf("the table's winner is not result.json's %s:\n%s", r.Winner.Candidate, o.stdout)
	}
	e := r.Winner.Engine
	if e == nil {
		t.Fatal("the winner has no engine")
	}
	if filepath.IsAbs(e.Path) {
		t.Errorf("engine path %s is absolute, want relative to the graph's directory", e.Path)
	}
	sum, size, err := bundle.SHA256File(filepath.Join(out, "graphs", "0", filepath.FromSlash(e.Path)))
	if err != nil {
		t.Fatal(err)
	}
	if sum != e.SHA256 || size != e.Size {
		t.Errorf("engine %s on disk: sha256 %s, %d bytes; result.json says %s, %d bytes", e.Path, sum, size, e.SHA256, e.Size)
	}
	if d := validate(t, dir).Digest; r.BundleDigest != d {
		t.Errorf("result.json bundle digest %s, validate says %s", r.BundleDigest, d)
	}
}

func TestTuneJSON(t *testing.T) {
	t.Parallel()
	dir := mlpBundle(t)
	out := filepath.Join(t.TempDir(), "result")
	o := worker(t, "tune", dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--strategy", "first-wins",
		"--bench-time", benchTime, "--out", out, "-o", "json", "-q")
	o.wantCode(t, cli.ExitOK)
	if o.stderr != "" {
		t.Errorf("-q, yet stderr is %q", o.stderr)
	}
	var rs []tuner.Result
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil {
		t.Fatalf("-o json output does not parse into []tuner.Result: %v\n%s", err, o.stdout)
	}
	if dec.More() {
		t.Errorf("more than one JSON value on stdout:\n%s", o.stdout)
	}
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	r := rs[0]
	if r.Format != tuner.ResultFormat || r.Graph != "0" || r.Winner == nil || r.Winner.Candidate != "ort:cpu:basic" {
		t.Fatalf("result: format %q, graph %q, winner %+v", r.Format, r.Graph, r.Winner)
	}
	if len(r.Results) != 2 || r.Results[1].Status != backend.StatusSkipped {
		t.Errorf("first-wins results %+v, want the second skipped", r.Results)
	}
	// stdout is what result.json holds.
	onDisk := readResult(t, out, "0")
	if onDisk.BundleDigest != r.BundleDigest || onDisk.Winner.Engine.SHA256 != r.Winner.Engine.SHA256 {
		t.Errorf("stdout and result.json disagree")
	}
}

// perturb adds delta to element 0 of a float32 tensor file.
func perturb(t *testing.T, path string, delta float32) {
	t.Helper()
	tt, err := bundle.ReadTensorFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if tt.DType != bundle.Float32 {
		t.Fatalf("%s is %s, want float32", path, tt.DType)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(tt.Data))
	binary.LittleEndian.PutUint32(tt.Data, math.Float32bits(v+delta))
	raw, err := bundle.EncodeTensorProto(tt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTuneNoWinnerWrongAnswer(t *testing.T) {
	t.Parallel()
	dir := mlpBundle(t)
	perturb(t, filepath.Join(dir, "graphs", "0", "samples", "0", "output_0.pb"), 1.0)
	if _, err := bundle.Open(dir); err != nil {
		t.Fatalf("the perturbed bundle does not validate: %v", err)
	}
	out := filepath.Join(t.TempDir(), "result")
	cands := []string{"ort:cpu:disabled", "ort:cpu:extended"}
	o := worker(t, "tune", dir, "--candidates", strings.Join(cands, ","), "--strategy", "first-wins",
		"--bench-time", benchTime, "--out", out, "-q")
	o.wantCode(t, cli.ExitFailed)
	if want := "worker: no winner for graph(s) 0\n"; !strings.HasSuffix(o.stderr, want) {
		t.Errorf("stderr %q does not end with %q", o.stderr, want)
	}
	for _, c := range cands {
		rows := tableRows(o.stdout, "0", c)
		if len(rows) != 1 || !strings.Contains(rows[0], "failed") || !strings.Contains(rows[0], "wrong_answer") {
			t.Errorf("candidate %s: rows %q, want one failed row with wrong_answer", c, rows)
		}
	}
	if rows := tableRows(o.stdout, "0", "-"); len(rows) != 1 || !strings.Contains(rows[0], "no winner") {
		t.Errorf("no 'no winner' row:\n%s", o.stdout)
	}
	r := readResult(t, out, "0")
	if r.Winner != nil {
		t.Fatalf("result.json has winner %+v", r.Winner)
	}
	if r.Failure == nil || r.Failure.Class != backend.FailWrongAnswer {
		t.Errorf("result.json failure %+v, want class wrong_answer", r.Failure)
	}
	for _, c := range r.Results {
		if c.Status != backend.StatusFailed || c.Failure == nil || c.Failure.Class != backend.FailWrongAnswer {
			t.Errorf("%s: status %s, failure %+v, want failed with wrong_answer", c.Candidate, c.Status, c.Failure)
			continue
		}
		if !strings.Contains(c.Failure.Message, "sample graphs/0/samples/0") {
			t.Errorf("%s: failure %q does not name the sample", c.Candidate, c.Failure.Message)
		}
	}
}

func TestTuneNoWinnerLatencyBudget(t *testing.T) {
	t.Parallel()
	dir := mlpBundle(t)
	out := filepath.Join(t.TempDir(), "result")
	o := worker(t, "tune", dir, "--candidates", "ort:cpu:basic", "--strategy", "latency-budget", "--latency-budget", "0.0000001",
		"--bench-time", benchTime, "--out", out, "-q")
	o.wantCode(t, cli.ExitFailed)
	if want := "worker: no winner for graph(s) 0\n"; !strings.HasSuffix(o.stderr, want) {
		t.Errorf("stderr %q does not end with %q", o.stderr, want)
	}
	r := readResult(t, out, "0")
	if r.Winner != nil || r.Failure == nil || !strings.Contains(r.Failure.Message, "latency budget") {
		t.Fatalf("result.json: winner %+v, failure %+v", r.Winner, r.Failure)
	}
	if r.Strategy != strategy.LatencyBudget || r.LatencyBudgetMs != 0.0000001 {
		t.Errorf("result.json: strategy %q, budget %g", r.Strategy, r.LatencyBudgetMs)
	}
	if len(r.Results) != 1 || r.Results[0].Status != backend.StatusPassed {
		t.Errorf("the candidate should pass and only miss the budget: %+v", r.Results)
	}
}

func TestTuneSelectedGraph(t *testing.T) {
	t.Parallel()
	needORT(t)
	// bundletest's reference outputs are not the models' outputs: every
	// candidate gives a wrong answer, and only the graph asked for is tuned.
	dir := bundletest.Write(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
	out := filepath.Join(t.TempDir(), "result")
	o := worker(t, "tune", dir, "--candidates", "ort:cpu:basic", "--strategy", "one-backend", "--graph", "1",
		"--bench-time", benchTime, "--out", out, "-q")
	o.wantCode(t, cli.ExitFailed)
	if want := "worker: no winner for graph(s) 1\n"; !strings.HasSuffix(o.stderr, want) {
		t.Errorf("stderr %q does not end with %q", o.stderr, want)
	}
	if got := entries(t, filepath.Join(out, "graphs")); !slices.Equal(got, []string{"1"}) {
		t.Errorf("graphs tuned: %v, want [1]", got)
	}
	if r := readResult(t, out, "1"); r.Failure == nil || r.Failure.Class != backend.FailWrongAnswer {
		t.Errorf("result.json failure %+v, want wrong_answer", r.Failure)
	}
}

func TestTuneMissingLibrary(t *testing.T) {
	t.Parallel()
	// A machine without the library is reported once, before any work, as
	// a machine problem (exit 3), naming the fix; nothing is written.
	dir := bundletest.Write(t)
	out := filepath.Join(t.TempDir(), "result")
	lib := "/x" + strings.Repeat("é", 40) + "/libonnxruntime.so"
	o := worker(t, "tune", dir, "--candidates", "ort:cpu:basic", "--strategy", "first-wins", "--ort-lib", lib,
		"--bench-time", benchTime, "--out", out, "-q")
	o.wantCode(t, cli.ExitInternal)
	for _, want := range []string{lib, "make ort"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr %q does not mention %q", o.stderr, want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out was created for a machine that cannot tune")
	}
}

func TestTuneErrors(t *testing.T) {
	t.Parallel()
	dir := bundletest.Write(t)
	for _, tc := range []struct {
		name string
		args []string // after "tune"; "BUNDLE" is replaced with the bundle, "OUT" with the output directory
		want []string
	}{
		{"unknown strategy", []string{"BUNDLE", "--out", "OUT", "--strategy", "fastest"},
			append([]string{`unknown strategy "fastest"`}, strategy.Names()...)},
		{"latency-budget without a budget", []string{"BUNDLE", "--out", "OUT", "--strategy", "latency-budget"},
			[]string{"strategy latency-budget needs a latency budget in ms greater than 0"}},
		{"latency-budget with a negative budget", []string{"BUNDLE", "--out", "OUT", "--strategy", "latency-budget", "--latency-budget", "-1"},
			[]string{"strategy latency-budget needs a latency budget"}},
		{"budget with max-throughput", []string{"BUNDLE", "--out", "OUT", "--strategy", "max-throughput", "--latency-budget", "5"},
			[]string{"a latency budget (5 ms) applies only to strategy latency-budget", `"max-throughput"`}},
		{"unknown backend", []string{"BUNDLE", "--out", "OUT", "--candidates", "foo:bar"},
			[]string{`unknown backend "foo"`, "ort"}},
		{"bad ort level", []string{"BUNDLE", "--out", "OUT", "--candidates", "ort:cpu:turbo"},
			[]string{`unknown optimization level "turbo"`, "disabled", "extended"}},
		{"bad ort option", []string{"BUNDLE", "--out", "OUT", "--candidates", "ort:cpu:basic:threads=many"},
			[]string{"threads=many must be a thread count"}},
		{"ort provider not in this build", []string{"BUNDLE", "--out", "OUT", "--candidates", "ort:cuda:all"},
			[]string{`execution provider "cuda" is not in this build`}},
		{"one-backend with two candidates", []string{"BUNDLE", "--out", "OUT", "--strategy", "one-backend", "--candidates", "ort:cpu:basic,ort:cpu:all"},
			[]string{"strategy one-backend takes exactly one candidate, got 2", "first-wins"}},
		{"empty candidates", []string{"BUNDLE", "--out", "OUT", "--candidates", ""},
			nil},
		{"unknown graph", []string{"BUNDLE", "--out", "OUT", "--graph", "7"},
			[]string{`has no graph "7"`}},
		{"missing --out", []string{"BUNDLE"},
			[]string{"--out DIR is required"}},
		{"unknown flag", []string{"BUNDLE", "--out", "OUT", "--turbo"},
			[]string{"unknown flag: --turbo"}},
		{"bad -o", []string{"BUNDLE", "--out", "OUT", "-o", "yaml"},
			[]string{`-o "yaml": want table or json`}},
		{"zero --bench-time", []string{"BUNDLE", "--out", "OUT", "--bench-time", "0s"},
			[]string{"--bench-time and --candidate-timeout must be positive"}},
		{"bad --bench-time", []string{"BUNDLE", "--out", "OUT", "--bench-time", "fast"},
			[]string{`invalid argument "fast"`, "--bench-time"}},
		{"bundle does not exist", []string{"MISSING", "--out", "OUT"},
			[]string{"open bundle", "MISSING"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			out := filepath.Join(tmp, "out")
			missing := filepath.Join(tmp, "no-such-bundle")
			repl := strings.NewReplacer("BUNDLE", dir, "OUT", out, "MISSING", missing)
			args := []string{"tune"}
			for _, a := range tc.args {
				args = append(args, repl.Replace(a))
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, repl.Replace(w))
			}
			worker(t, args...).wantError(t, "worker", cli.ExitUsage, want...)
			wantAbsent(t, out)
		})
	}
}
