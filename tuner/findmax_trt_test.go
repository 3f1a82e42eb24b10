package tuner_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/maxbatch"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/trt"
	"github.com/tunefleet/tunefleet/tuner"
)

// A graph recorded at batch 1..8 whose max batch the find-max-batch step
// raises (to 16 or 32, the only sizes it may try here) is built by trtexec
// with that batch as opt and max, exactly as AITune's TensorRT backend
// takes min/opt/max from the extended graph spec (get_effective_input_shapes:
// min, max, max); the engine is checked at that max and swept up to it.
// trtexec is the stand-in; the neutral engine is the real ONNX Runtime.
func TestFindMaxBatchSetsTheTensorRTProfile(t *testing.T) {
	needORT(t)
	b, samples := standInBundle(t) // input [N,4], declared 1..8
	g := b.Manifest.Graphs[0]
	outputs := map[string]string{}
	for _, bs := range []int{16, 32} {
		ext := g
		ext.Inputs = maxbatch.Extend(g.Inputs, bs)
		maps.Copy(outputs, trtreplay.GraphOutputs(t, ext, b.Manifest.DynamicShapes, samples))
	}
	cfg := trtreplay.Working(t, outputs)
	cfg.ArgvLog = filepath.Join(t.TempDir(), "argv.jsonl")
	env := trtreplay.WriteConfig(t, cfg)
	reg := backend.Registry{
		"trt": trt.New(trt.Options{Executable: trtreplay.Executable(t), Env: []string{env}}),
		"ort": ort.New(ort.Options{}),
	}
	cand, _ := backend.ParseCandidates("trt:fp16")
	strat, _ := strategy.Parse(strategy.MaxThroughput, 0)
	res, err := tuner.TuneGraph(context.Background(), b, "0", filepath.Join(t.TempDir(), "out"), tuner.Options{
		Backends: reg, Strategy: strat, Candidates: cand, StopRule: backend.DefaultStopRule(),
		BatchSizes: []int{1, 8, 16, 32}, FindMaxBatch: true, FindBatchSizes: []int{16, 32},
	})
	if err != nil {
		t.Fatal(err)
	}
	found := res.FoundMaxBatch
	if !res.OK() || (found != 16 && found != 32) || !res.FindMaxBatch.Extended {
		t.Fatalf("winner %+v, failure %+v, find_max_batch %+v", res.Winner, res.Failure, res.FindMaxBatch)
	}
	var build []string
	for _, a := range trtreplay.ReadArgv(t, cfg.ArgvLog) {
		if slices.Contains(a.Args, "--saveEngine=model.plan") {
			build = a.Args
		}
	}
	want := []string{"--minShapes=input:1x4", fmt.Sprintf("--optShapes=input:%dx4", found), fmt.Sprintf("--maxShapes=input:%dx4", found)}
	if i := slices.Index(build, want[0]); i < 0 || !slices.Equal(build[i:i+3], want) {
		t.Fatalf("build argv %q, want %q in it", build, want)
	}
	var swept []int
	for _, st := range res.Results[0].Benchmarks {
		swept = append(swept, st.BatchSize)
	}
	if swept[len(swept)-1] != found || res.BatchSizes[len(res.BatchSizes)-1] != found {
		t.Errorf("swept %v (plan %v), want the sweep to reach %d", swept, res.BatchSizes, found)
	}
}
