package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Finalize writes state.json, report.html and the history entry a graph at
// a time; what it writes is byte for byte what the whole-state builders
// write from the same run (BuildState and json.MarshalIndent, runreport.Page
// of the report with every result, history.FromState), on a real
// redis-server and a file store: a run small enough to be written in
// memory and one whose outputs pass spoolInMemory and go through files; a
// run that is done and one that failed (a graph failed, one without a
// result). Nothing of the finalize's scratch files stays in the work
// directory.
func TestFinalizeWritesWhatTheWholeStateWould(t *testing.T) {
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	runs := runstate.NewRuns(rdb)
	for _, tc := range []struct {
		name    string
		graphs  int
		failing bool // graphs of every kind: one in four failed, one in four without a result
		spill   bool // the outputs pass spoolInMemory
	}{
		{"5 graphs, done", 5, false, false},
		{"7 graphs, failed", 7, true, false},
		{"600 graphs, failed, through files", 600, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := artifacts.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			workDir := t.TempDir()
			w := &Worker{cfg: WorkerConfig{Store: store, Name: "finalizer", WorkDir: workDir}.withDefaults(), runs: runs}
			spec, before := finalizeFixture(t, runs, store, tc.graphs, tc.failing)
			if err := w.finalize(ctx, FinalizePayload{V: PayloadVersion, Run: spec.Run}); err != nil {
				t.Fatal(err)
			}
			read := func(key string) []byte {
				t.Helper()
				data, err := artifacts.ReadObject(ctx, store, key, artifacts.MaxJSONSize)
				if err != nil {
					t.Fatal(err)
				}
				return data
			}
			stateJSON := read(artifacts.StateKey(spec.Run))
			var written state.State
			if err := json.Unmarshal(stateJSON, &written); err != nil {
				t.Fatal(err)
			}
			if got := int64(len(stateJSON)) > spoolInMemory; got != tc.spill {
				t.Fatalf("state.json of %d bytes: past spoolInMemory %v, want %v (the fixture no longer tests what it says)", len(stateJSON), got, tc.spill)
			}
			if want := map[bool]string{false: runstate.RunDone, true: runstate.RunFailed}[tc.failing]; written.Status != want {
				t.Fatalf("status %s, want %s (%v)", written.Status, want, written.Reasons)
			}
			// The whole state, from the results finalize published.
			results := map[string]*tuner.Result{}
			for _, g := range spec.Manifest.Graphs {
				var r tuner.Result
				switch err := artifacts.GetJSON(ctx, store, artifacts.GraphResultKey(spec.Run, g.Name), &r); {
				case err == nil:
					results[g.Name] = &r
				case !errors.Is(err, artifacts.ErrNotExist):
					t.Fatal(err)
				}
			}
			ms := BuildState(spec, before, results)
			ms.Provenance.FinalizedAt = written.Provenance.FinalizedAt
			whole, err := json.MarshalIndent(ms, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "state.json", stateJSON, append(whole, '\n'))

			var page bytes.Buffer
			if err := runreport.Page(&page, runReport(spec, before, ms, results)); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "report.html", read(artifacts.RunReportKey(spec.Run)), page.Bytes())

			ref := artifacts.Ref{SHA256: sha256Hex(stateJSON), Size: int64(len(stateJSON))}
			if !bytes.Equal(read(ref.Key()), stateJSON) {
				t.Error("the state blob is not state.json")
			}
			e := history.FromState(ms, results, ref, spec.Nightly).WithRun(spec.Manifest.Graphs, spec.BenchTime, spec.Warmup, spec.Remeasure)
			entry, err := json.MarshalIndent(e, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			for _, where := range uniq(ms.Platform, spec.Target) {
				sameBytes(t, "history entry under "+where, read(history.Key(spec.Model, where, e.Created, spec.Run)), append(entry, '\n'))
			}
			left, err := os.ReadDir(workDir)
			if err != nil || len(left) > 0 {
				t.Errorf("the work directory holds %v after finalize (%v)", left, err)
			}
		})
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	from := max(i-80, 0)
	t.Errorf("%s: %d bytes, the whole-state builder's %d; they differ from byte %d:\n got …%s\nwant …%s", what, len(got), len(want), i,
		got[from:min(i+80, len(got))], want[from:min(i+80, len(want))])
}

// finalizeFixture submits a run of n graphs (its run.json and its record
// in Redis) and completes every graph as a worker would: a result under its
// attempt's key, then CompleteGraph. Its graphs cycle through a winner with
// an engine and its data (reused), a winner whose max batch was extended
// (a tie, with a speedup), and, when failing, a graph whose candidates all
// failed and one that failed without a result. It returns run.json and the
// record as finalize finds it.
func finalizeFixture(t *testing.T, runs *runstate.Runs, store artifacts.Store, n int, failing bool) (*RunSpec, runstate.RunStatus) {
	t.Helper()
	ctx := context.Background()
	run := fmt.Sprintf("stream.m-%d-%d", n, time.Now().UnixNano())
	engine, err := artifacts.PutBytes(ctx, store, []byte("an engine, byte for byte"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := artifacts.PutBytes(ctx, store, []byte("its external data"))
	if err != nil {
		t.Fatal(err)
	}
	in := bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: "input", Shape: []shapes.Axis{}, Min: []int64{1, 4}, Max: []int64{8, 4}}, DType: "float32"}
	out := bundle.TensorDecl{TensorSpec: shapes.TensorSpec{Name: "output", Min: []int64{1, 3}, Max: []int64{8, 3}}, DType: "float32"}
	spec := &RunSpec{Format: "tunefleet.run/v1", Run: run, Model: "stream.m", Target: "cpu", BundleDigest: "sha256:" + strings.Repeat("d", 64),
		Strategy: "max-throughput", Candidates: []string{"ort:cpu:basic", "ort:cpu:all"}, BenchTime: 20 * time.Millisecond,
		SubmittedAt: time.Now().UTC().Truncate(time.Millisecond), SubmittedBy: "test", Nightly: "night-1", WorkKeys: map[string]string{}}
	var names []string
	for i := range n {
		name := fmt.Sprint(i)
		g := bundle.Graph{Name: name, ONNX: "graphs/" + name + "/model.onnx", Inputs: []bundle.TensorDecl{in}, Outputs: []bundle.TensorDecl{out}}
		if i%5 == 1 {
			atol := 0.01
			g.Tolerances = map[string]bundle.Tolerance{"output": {ATol: &atol}}
		}
		spec.Manifest.Graphs = append(spec.Manifest.Graphs, g)
		names = append(names, name)
	}
	if err := artifacts.PutJSON(ctx, store, artifacts.RunKey(run), spec); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Create(ctx, run, spec.Model, spec.Target, names); err != nil {
		t.Fatal(err)
	}
	stats := func(tput float64) []backend.Stats {
		var out []backend.Stats
		for _, bs := range []int{1, 2, 4, 8} {
			out = append(out, backend.Stats{BatchSize: bs, Samples: 100 * bs, MeanMs: float64(bs) * 1000 / tput, P50Ms: 0.5 * float64(bs), P90Ms: 0.7 * float64(bs),
				P99Ms: 0.9 * float64(bs), Throughput: tput * float64(bs) / 2, Stable: bs != 8, StopReason: "stable", RoundMs: []float64{1, 1.1, 0.9}, Outliers: bs % 3})
		}
		return out
	}
	for i, name := range names {
		r := &tuner.Result{Format: tuner.ResultFormat, Model: spec.Model, Graph: name, Strategy: spec.Strategy, Candidates: spec.Candidates,
			Inputs:     []bundle.FileDigest{{Path: "graphs/" + name + "/model.onnx", SHA256: strings.Repeat("e", 64), Size: 567}},
			Profile:    shapes.Profile{Inputs: []shapes.InputProfile{{Name: "input", Min: []int64{1, 4}, Opt: []int64{8, 4}, Max: []int64{8, 4}}}},
			BatchSizes: []int{1, 2, 4, 8}, Worker: fmt.Sprint("worker-", i%3), Platform: "cpu-x", StartedAt: spec.SubmittedAt, Duration: time.Duration(i+1) * 1234567 * time.Nanosecond,
			Results: []backend.CandidateResult{
				{Candidate: "ort:cpu:basic", Status: backend.StatusPassed, Benchmarks: stats(100 + float64(i)), Info: map[string]string{"ort_version": "1.24.1"},
					Artifacts: []backend.FileRef{{Role: "log", Path: "ort_cpu_basic/build.log", SHA256: strings.Repeat("a", 64), Size: 10}}},
				{Candidate: "ort:cpu:all", Status: backend.StatusPassed, Benchmarks: stats(120 + float64(i)), Info: map[string]string{"ort_version": "1.24.1", "opt_level": "all"}},
			}}
		status := runstate.GraphStatus{Status: runstate.GraphDone}
		switch kind := i % 4; {
		case kind == 2 && failing:
			r.Results[1].Status, r.Results[1].Benchmarks = backend.StatusFailed, nil
			r.Results[1].Failure = &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "output 0 differs <by> 3\nsecond line"}
			r.Results[0].Status, r.Results[0].Benchmarks = backend.StatusFailed, nil
			r.Results[0].Failure = &backend.FailureInfo{Class: backend.FailBuild, Message: "no engine"}
			r.Failure = &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "every candidate failed"}
			status = runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(backend.FailWrongAnswer)}
		case kind == 3 && failing:
			r = nil
			status = runstate.GraphStatus{Status: runstate.GraphFailed, Class: string(backend.FailInfrastructure), Message: "worker lost"}
		case kind%2 == 0:
			r.Winner = &tuner.Winner{Selection: strategy.Selection{Index: 1, Candidate: "ort:cpu:all", BatchSize: 8, Metric: "throughput", Value: 480, Reason: "highest throughput"},
				Engine:     &backend.FileRef{Role: "engine", Path: "ort_cpu_all/model.onnx", SHA256: engine.SHA256, Size: engine.Size},
				EngineData: []backend.FileRef{{Role: backend.RoleEngineData, Path: "ort_cpu_all/model.onnx.data", SHA256: data.SHA256, Size: data.Size}}}
			r.MarkReused(run)
			r.ReusedFrom = "stream.m-earlier"
		default:
			r.FoundMaxBatch = 16
			r.Winner = &tuner.Winner{Selection: strategy.Selection{Index: 0, Candidate: "ort:cpu:basic", BatchSize: 4, Reason: "a tie <within noise>",
				Decision: "tie", Tied: []string{"ort:cpu:basic", "ort:cpu:all"}},
				Engine: &backend.FileRef{Role: "engine", Path: "ort_cpu_basic/model.onnx", SHA256: engine.SHA256, Size: engine.Size}}
		}
		if r != nil {
			key := artifacts.GraphAttemptResultKey(run, name, 1)
			if err := artifacts.PutJSON(ctx, store, key, r); err != nil {
				t.Fatal(err)
			}
			status.ResultKey = key
		}
		if _, _, err := runs.CompleteGraph(ctx, run, name, status); err != nil {
			t.Fatal(err)
		}
	}
	st, err := runs.Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	return spec, st
}
