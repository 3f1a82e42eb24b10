package strategy

import (
	"fmt"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/noise"
)

// Speedup is how much faster the winner is than a baseline candidate: the
// ratio of their costs per sample (> 1: the winner is faster), with its
// interval by the noise rule over the rounds of the two measurements.
// Both are taken at the winner's batch size when the baseline was measured
// there (the same interleaved rounds, compared round by round); otherwise
// the baseline's best throughput stands in, compared by Welch's interval.
type Speedup struct {
	Baseline string      `json:"baseline"`
	Ratio    noise.Ratio `json:"ratio"`
	// BatchSize is the winner's; BaselineBatchSize the baseline's
	// measurement's (the same unless the baseline's sweep stopped short
	// of the winner's batch size).
	BatchSize         int `json:"batch_size,omitempty"`
	BaselineBatchSize int `json:"baseline_batch_size,omitempty"`
	// Identical says the baseline's engine is the winner's (byte-identical,
	// measured once): there is no speedup to measure, and Ratio is the
	// measurement compared with itself (exactly 1), which no text shows.
	Identical bool `json:"identical,omitempty"`
}

// optimizationRank orders candidates by how much they optimize, for the
// default baseline: the words of a candidate string (ONNX Runtime's graph
// optimization levels, TensorRT's precisions) have a rank, and a candidate
// ranks as its highest word. ONNX Runtime ranks below TensorRT (an
// unoptimized ORT session is the plainest way to run an ONNX graph).
var optimizationRank = map[string]int{
	"disabled": 0, "basic": 1, "extended": 2, "all": 3,
	"fp32": 10, "noTF32": 9, "tf32": 10, "strongly-typed": 11,
	"fp16": 12, "bf16": 12, "int8": 13, "fp8": 13, "best": 14,
}

// backendRank is what a backend adds to a candidate's rank.
var backendRank = map[string]int{"ort": 0, "trt": 100}

// rank is a candidate string's optimization rank (see optimizationRank).
func rank(candidate string) int {
	parts := strings.Split(candidate, ":")
	r, ok := backendRank[parts[0]]
	if !ok {
		r = 50
	}
	top := 0
	for _, p := range parts[1:] {
		if v, ok := optimizationRank[p]; ok && v > top {
			top = v
		}
	}
	return r + top
}

// DefaultBaseline is the least optimized of the candidates (ONNX
// Runtime's "disabled" level before "basic", TensorRT's fp32 before fp16,
// …), the first in candidate order among equals; "" for none.
func DefaultBaseline(candidates []string) string {
	best, bestRank := "", 0
	for _, c := range candidates {
		if r := rank(c); best == "" || r < bestRank {
			best, bestRank = c, r
		}
	}
	return best
}

// CheckBaseline rejects a baseline that is not one of the candidates.
func CheckBaseline(baseline string, candidates []backend.Candidate) error {
	if baseline == "" {
		return nil
	}
	var names []string
	for _, c := range candidates {
		if c.String() == baseline {
			return nil
		}
		names = append(names, c.String())
	}
	return fmt.Errorf("baseline %q is not one of the candidates (%s)", baseline, strings.Join(names, ", "))
}

// SpeedupOver is the winner's speedup over baseline among results (""
// baseline: DefaultBaseline of their candidates). It is nil when either
// was not measured (a baseline that failed, a strategy that measured
// nothing) or the baseline is not among the results.
func SpeedupOver(results []backend.CandidateResult, sel Selection, baseline string) *Speedup {
	if sel.Index < 0 || sel.Index >= len(results) {
		return nil
	}
	if baseline == "" {
		var names []string
		for _, r := range results {
			names = append(names, r.Candidate)
		}
		baseline = DefaultBaseline(names)
	}
	win, ok := Headline(&sel, results[sel.Index].Benchmarks)
	if !ok || win.SampleCostMs() <= 0 {
		return nil
	}
	for _, r := range results {
		if r.Candidate != baseline {
			continue
		}
		if !r.Passed() {
			return nil
		}
		base, ok := r.AtBatch(win.BatchSize)
		if !ok {
			if base, ok = r.BestThroughput(0); !ok {
				return nil
			}
		}
		if base.SampleCostMs() <= 0 {
			return nil
		}
		return &Speedup{Baseline: baseline, Ratio: Compare(win, base), BatchSize: win.BatchSize, BaselineBatchSize: base.BatchSize,
			Identical: r.Candidate != sel.Candidate && engineOf(r) == engineOf(results[sel.Index])}
	}
	return nil
}

// Text is the speedup for tables: "2.31× (2.20–2.43) over ort:cpu:disabled",
// with "~" before × when it is within noise of 1.
func (s *Speedup) Text() string {
	if s == nil {
		return "—"
	}
	if s.Identical {
		return fmt.Sprintf("none: identical engines (one measured) with the baseline %s", s.Baseline)
	}
	if s.Ratio.Lo == 1 && s.Ratio.Hi == 1 {
		// One measurement compared with itself: the baseline won (or an
		// identical engine of it did); an interval "(1–1)" says nothing.
		return fmt.Sprintf("1× (the baseline %s won)", s.Baseline)
	}
	mark := ""
	if s.Ratio.Decide(noise.MinGain) == noise.Tie {
		mark = "~"
	}
	return fmt.Sprintf("%s%s× (%s–%s) over %s", mark, ratioShort(s.Ratio.Value), ratioShort(s.Ratio.Lo), ratioShort(s.Ratio.Hi), s.Baseline)
}

// Short is the speedup's value alone, "2.31×" ("—" for none,
// "identical" for the baseline's own engine).
func (s *Speedup) Short() string {
	if s == nil {
		return "—"
	}
	if s.Identical {
		return "identical"
	}
	return ratioShort(s.Ratio.Value) + "×"
}

func ratioShort(v float64) string {
	t := RatioFigure(v)
	if t == "∞" {
		return t
	}
	return strings.TrimSuffix(strings.TrimRight(t, "0"), ".")
}
