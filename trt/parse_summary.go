package trt

import (
	"math"
	"strconv"
	"strings"
)

// The "=== Performance summary ===" block and the per-layer profile
// table (--dumpProfile).

// summary handles a line of the performance summary; false when the line
// is not one of its figures.
func (p *parser) summary(trim string) bool {
	s := p.l.Summary
	if s == nil {
		return false
	}
	name, rest, ok := strings.Cut(trim, ": ")
	if !ok {
		return false
	}
	switch name {
	case "Throughput":
		if v, ok := leadingFloat(rest); ok {
			s.ThroughputQPS = v
		}
		return true
	case "Total Host Walltime":
		if v, ok := leadingFloat(rest); ok {
			s.TotalHostWalltimeS = v
		}
		return true
	case "Total GPU Compute Time":
		if v, ok := leadingFloat(rest); ok {
			s.TotalGPUComputeS = v
		}
		return true
	}
	if !strings.HasPrefix(rest, "min = ") {
		return false
	}
	d := parseDistribution(name, rest)
	switch name {
	case "Latency":
		s.Latency = &d
	case "End-to-End Host Latency":
		s.EndToEnd = &d
	case "Enqueue Time":
		s.Enqueue = &d
	case "H2D Latency":
		s.H2D = &d
	case "GPU Compute Time":
		s.GPUCompute = &d
	case "D2H Latency":
		s.D2H = &d
	default:
		if len(s.Other) < 64 {
			s.Other = append(s.Other, d)
		}
	}
	return true
}

// parseDistribution reads "min = 1.2 ms, max = …, percentile(99%) = … ms".
func parseDistribution(name, rest string) Distribution {
	d := Distribution{Name: name}
	for _, item := range strings.Split(rest, ", ") {
		k, v, ok := strings.Cut(item, " = ")
		if !ok {
			continue
		}
		x, ok := leadingFloat(v)
		if !ok {
			continue
		}
		switch {
		case k == "min":
			d.MinMs = x
		case k == "max":
			d.MaxMs = x
		case k == "mean":
			d.MeanMs = x
		case k == "median":
			d.MedianMs = x
		case strings.HasPrefix(k, "percentile(") && strings.HasSuffix(k, "%)"):
			if pv, ok := leadingFloat(k[len("percentile(") : len(k)-2]); ok && len(d.Percentiles) < 100 {
				d.Percentiles = append(d.Percentiles, Percentile{P: pv, Ms: x})
			}
		}
	}
	return d
}

// profileRow reads one row of the --dumpProfile table: four numeric
// columns (three before 8.4, without the median) and the layer name, which
// may contain spaces.
func (p *parser) profileRow(trim string) {
	prof := p.l.Profile
	if prof == nil || strings.HasPrefix(trim, "Time(ms)") || len(prof.Layers) >= maxLayerRows {
		return
	}
	var nums []float64
	rest := trim
	for len(nums) < 4 {
		tok, after, _ := strings.Cut(rest, " ")
		v, err := strconv.ParseFloat(tok, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			break
		}
		nums = append(nums, v)
		rest = strings.TrimLeft(after, " ")
	}
	if len(nums) < 3 || rest == "" {
		return
	}
	row := LayerTime{Name: rest, TotalMs: nums[0], AvgMs: nums[1]}
	if len(nums) == 4 {
		row.MedianMs, row.Percent = nums[2], nums[3]
	} else {
		row.Percent = nums[2]
	}
	if rest == "Total" {
		prof.Total = &row
		return
	}
	prof.Layers = append(prof.Layers, row)
}
