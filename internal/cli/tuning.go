package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
)

// tuningFlags are the flags that say how a graph is tuned, shared by
// `worker tune` and `producer submit`.
type tuningFlags struct {
	candidates string
	strategy   string
	budgetMs   float64
	benchTime  time.Duration
	warmup     time.Duration
	timeout    time.Duration
	ortLib     string
	tolerances toleranceFlags
	// findMaxBatch: AITune's find-max-batch-size step (tuner.Options.FindMaxBatch).
	findMaxBatch bool
	baseline     string
}

func (f *tuningFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.candidates, "candidates", "ort:cpu:basic,ort:cpu:extended", "comma-separated candidates, tried in order")
	fl.StringVar(&f.strategy, "strategy", strategy.MaxThroughput, "how each graph's winner is chosen: "+strings.Join(strategy.Names(), ", "))
	fl.Float64Var(&f.budgetMs, "latency-budget", 0, "latency budget in ms per call (latency-budget strategy)")
	fl.DurationVar(&f.benchTime, "bench-time", 2*time.Second, "time to measure one candidate at one batch size, in interleaved rounds (a slow model's measurement may go on to its minimum of calls, up to five times this)")
	fl.DurationVar(&f.warmup, "warmup", 0, "longest warm-up before a measurement (default: a quarter of --bench-time; at least one call, at most 10)")
	fl.DurationVar(&f.timeout, "candidate-timeout", 30*time.Minute, "longest build+check+benchmark of one candidate")
	fl.StringVar(&f.ortLib, "ort-lib", "", "ONNX Runtime library (default: $"+ort.LibraryEnv+" or the one make ort fetched)")
	fl.StringVar(&f.baseline, "baseline", "", "the candidate each winner's speedup is measured against, in the same rounds (default: the least optimized candidate, e.g. ort:cpu:disabled)")
	f.tolerances.register(fl)
	fl.BoolVar(&f.findMaxBatch, "find-max-batch", false, "first extend each graph's max batch to where ONNX Runtime's throughput (optimizations off) saturates, as AITune's tune does (off by default: a sweep per graph, and the bundle's reference outputs cover only the recorded range)")
}

// parse checks the flags and returns the strategy and candidates; its
// errors are the user's (usage errors).
func (f *tuningFlags) parse() (strategy.Strategy, []backend.Candidate, error) {
	if f.benchTime <= 0 || f.timeout <= 0 {
		return nil, nil, usageErr(fmt.Errorf("--bench-time and --candidate-timeout must be positive"))
	}
	if f.warmup < 0 {
		return nil, nil, usageErr(fmt.Errorf("--warmup %s must not be negative", f.warmup))
	}
	strat, err := strategy.Parse(f.strategy, f.budgetMs)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	cands, err := backend.ParseCandidates(f.candidates)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	return strat, cands, nil
}
